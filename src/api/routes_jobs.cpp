// Fine-tuning jobs (OpenAI's /v1/fine_tuning/jobs, with events, checkpoints,
// logs and cancel), evaluations (/v1/evals: jobs of kind "eval") and the
// estimate (/v1/fine_tuning/jobs/estimate: a job checked as if created).
#include "api/batch_request.h"
#include "api/context.h"
#include "api/estimate.h"
#include "api/job_request.h"
#include "api/models.h"
#include "api/sample_request.h"
#include "core/fs.h"
#include "core/ids.h"

namespace burst {
namespace {

bool IsEval(const JobRecord& job) { return job.kind() == TaskKind::kEval; }

Json RenderJob(ApiContext& ctx, const JobRecord& job) {
  if (IsEval(job)) return EvalJson(job, ctx.md.JobUsage(job.id).ValueOrThrow());
  if (job.kind() == TaskKind::kBatch) return BatchJson(job, ctx.md.JobUsage(job.id).ValueOrThrow());
  return JobJson(job, ctx.md.ListAttempts(job.id).ValueOrThrow(), ctx.md.JobUsage(job.id).ValueOrThrow());
}

std::optional<JobRecord> OwnJob(ApiContext& ctx, const ApiKey& key, const http::Request& req,
                                http::Response& res, std::optional<bool> eval) {
  if (!eval) return OwnJobOfKind(ctx, key, req, res, std::nullopt);
  return OwnJobOfKind(ctx, key, req, res, *eval ? TaskKind::kEval : TaskKind::kTrain);
}

void Estimate(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  auto body = ReadBody(req, res);
  if (!body) return;
  JobRequestContext jctx = ctx.JobContext(key.org_id);
  Json out;
  Status s = Try([&] {
    // "workers": a list asks for each N (more than the slots: a simulation).
    std::vector<int64_t> counts;
    const Json asked = body->is_object() ? body->value("workers", Json()) : Json();
    if (asked.is_array()) {
      if (asked.empty() || asked.size() > 16) BadField("workers", "a list of 1 to 16 worker counts");
      for (const Json& n : asked) {
        if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > 64) {
          BadField("workers", "each worker count must be an integer in 1..64");
        }
        counts.push_back(n.get<int64_t>());
      }
      jctx.max_workers = 0;
    }
    const RuntimeOptions& ro = ctx.rt.options();
    const EstimatePrices prices{
        ro.price_per_slot_second, ro.price_train_per_mtok, ro.threads_per_slot,    ro.slot_type, ro.slots,
        ro.auto_communication,    ctx.rt.Pool(),           ro.price_per_gpu_second};
    auto one = [&](const Json& b) {
      ParsedJob parsed = ParseJobRequest(b, jctx);
      const FileRecord train =
          ctx.md.GetFile(key.org_id, parsed.spec.value("training_file", "")).ValueOrThrow();
      const ModelInfo model = CatalogEntryFor(parsed.spec.value("base_model", ""), ctx.opt.model_roots);
      return EstimateJob(parsed, train, model, key.org_id, ctx.md, prices);
    };
    if (counts.empty()) {
      out = one(*body);
      return;
    }
    Json by = Json::array();
    for (int64_t n : counts) {
      Json b = *body;
      b["workers"] = n;
      by.push_back(one(b));
    }
    out = by[0];
    out["by_workers"] = by;
    size_t fastest = 0, cheapest = 0;
    for (size_t i = 1; i < by.size(); ++i) {
      if (by[i]["seconds"].get<double>() < by[fastest]["seconds"].get<double>()) fastest = i;
      if (by[i]["cost"].get<double>() < by[cheapest]["cost"].get<double>()) cheapest = i;
    }
    out["fastest_workers"] = by[fastest]["workers"];
    out["cheapest_workers"] = by[cheapest]["workers"];
  });
  if (!s.ok()) return SendStatus(res, s);
  SendJson(res, 200, out);
}

void Create(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res, bool eval) {
  auto body = ReadBody(req, res);
  if (!body) return;
  const std::string idem = req.header("idempotency-key");
  if (!CheckText(idem, "idempotency_key", 256, res)) return;
  JobRequestContext jctx = ctx.JobContext(key.org_id);
  ParsedJob parsed;
  Status parse = Try([&] {
    parsed = eval ? ParseEvalRequest(*body, jctx) : ParseJobRequest(*body, jctx);
    const std::string shipped = ctx.ShippedModel(parsed.spec.value("base_model", ""));
    if (!shipped.empty()) parsed.spec["base_model_store"] = shipped;
  });
  if (!parse.ok()) return SendStatus(res, parse);
  // A job writes checkpoints: none while the organisation is over its quota.
  if (Status quota = ctx.CheckStorage(key.org_id, 0, eval ? "model" : "training_file"); !quota.ok()) {
    return SendStatus(res, quota);
  }
  JobRecord job;
  job.id = NewId(eval ? "eval" : "ftjob");
  job.org_id = key.org_id;
  job.idempotency_key = idem;
  job.request_sha256 = Sha256Hex(body->dump());
  job.spec = std::move(parsed.spec);
  job.total_steps = parsed.total_steps;
  bool created = false;
  auto rec = ctx.rt.Submit(std::move(job), &created);
  if (!rec.ok()) return SendStatus(res, rec.status());
  // A job just created is answered as created: no attempt, no usage yet
  // (two reads fewer per submission); a replay shows where it is now.
  if (created) {
    return SendJson(
        res, 200,
        IsEval(rec.value()) ? EvalJson(rec.value(), UsageSum{}) : JobJson(rec.value(), {}, UsageSum{}));
  }
  SendJson(res, 200, RenderJob(ctx, rec.value()));
}

void Get(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res, bool eval) {
  if (auto job = OwnJob(ctx, key, req, res, eval)) SendJson(res, 200, RenderJob(ctx, *job));
}

// OpenAI's metadata filter, `metadata[KEY]=VALUE` (each must match; at most
// 16), from the query; nullopt after answering 400 for a malformed one.
std::optional<std::vector<std::pair<std::string, std::string>>> MetadataFilter(const http::Request& req,
                                                                               http::Response& res) {
  std::vector<std::pair<std::string, std::string>> want;
  for (const auto& [name, value] : req.params) {
    if (name.rfind("metadata", 0) != 0) continue;
    if (name.size() < 11 || name[8] != '[' || name.back() != ']' || name.size() - 10 > 64 ||
        want.size() == 16) {
      SendStatus(res,
                 Status(Code::kInvalidArgument,
                        "metadata: filter as metadata[KEY]=VALUE (keys of at most 64 characters, at most 16)",
                        "metadata"));
      return std::nullopt;
    }
    want.emplace_back(name.substr(9, name.size() - 10), value);
  }
  return want;
}

bool MetadataMatches(const JobRecord& job, const std::vector<std::pair<std::string, std::string>>& want) {
  const Json metadata = job.spec.value("metadata", Json::object());
  for (const auto& [k, v] : want) {
    auto it = metadata.find(k);
    if (it == metadata.end() || !it->is_string() || it->get<std::string>() != v) return false;
  }
  return true;
}

void List(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res, bool eval) {
  int64_t limit = 0;
  if (!ReadLimit(req, res, &limit)) return;
  const auto want = MetadataFilter(req, res);
  if (!want) return;
  const TaskKind kind = eval ? TaskKind::kEval : TaskKind::kTrain;
  if (want->empty()) {
    auto jobs = ctx.md.ListJobs(key.org_id, req.param("after"), limit + 1, kind);
    if (!jobs.ok()) return SendStatus(res, jobs.status());
    return SendJson(res, 200,
                    Page(jobs.value(), limit, [&](const JobRecord& j) { return RenderJob(ctx, j); }));
  }
  // Filtered: read on, a page of the organisation's jobs at a time, until a
  // page of matches (and one more, for has_more) or the end.
  std::vector<JobRecord> matches;
  std::string after = req.param("after");
  while (static_cast<int64_t>(matches.size()) <= limit) {
    auto jobs = ctx.md.ListJobs(key.org_id, after, 200, kind);
    if (!jobs.ok()) return SendStatus(res, jobs.status());
    if (jobs.value().empty()) break;
    after = jobs.value().back().id;
    const bool last = jobs.value().size() < 200;
    for (JobRecord& j : jobs.value()) {
      if (MetadataMatches(j, *want)) matches.push_back(std::move(j));
    }
    if (last) break;
  }
  SendJson(res, 200, Page(matches, limit, [&](const JobRecord& j) { return RenderJob(ctx, j); }));
}

void Cancel(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res,
            std::optional<bool> eval) {
  if (!OwnJob(ctx, key, req, res, eval)) return;
  auto job = ctx.rt.Cancel(key.org_id, req.matches[1]);
  if (!job.ok()) return SendStatus(res, job.status());
  SendJson(res, 200, RenderJob(ctx, job.value()));
}

// POST .../pause and .../resume (OpenAI's): a fine-tuning job stops after a
// state checkpoint and waits, then goes on from it (runtime.h, Pause).
void PauseOrResume(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res,
                   bool pause) {
  if (!OwnJob(ctx, key, req, res, false)) return;
  auto job = pause ? ctx.rt.Pause(key.org_id, req.matches[1]) : ctx.rt.Resume(key.org_id, req.matches[1]);
  if (!job.ok()) return SendStatus(res, job.status());
  SendJson(res, 200, RenderJob(ctx, job.value()));
}

void Events(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res,
            std::optional<bool> eval) {
  auto job = OwnJob(ctx, key, req, res, eval);
  if (!job) return;
  int64_t limit = 0;
  if (!ReadLimit(req, res, &limit)) return;
  const std::string order = req.has_param("order") ? req.param("order") : "desc";
  if (order != "asc" && order != "desc") {
    return SendStatus(res, Status(Code::kInvalidArgument, "order must be asc or desc", "order"));
  }
  auto events = ctx.md.ListEvents(job->id, req.param("after"), limit + 1, order == "asc");
  if (!events.ok()) return SendStatus(res, events.status());
  SendJson(res, 200, Page(events.value(), limit, [](const EventRecord& e) -> Json {
             return {{"object", "fine_tuning.job.event"},
                     {"id", "ftevent-" + std::to_string(e.seq)},
                     {"created_at", e.created_at},
                     {"level", e.level},
                     {"type", e.type},
                     {"message", e.message},
                     {"data", e.data}};
           }));
}

// A checkpoint's held-out metrics against the base model's (both in its
// metrics when the job has a validation file): each difference, and
// whether its eval loss is lower. Null without both.
Json VsBaseline(const Json& m) {
  const Json& b = m.is_object() ? m.value("baseline", Json()) : Json();
  if (!b.is_object() || !m.contains("eval_loss") || !m["eval_loss"].is_number()) return Json();
  Json out = Json::object();
  for (const char* k : {"eval_loss", "eval_token_acc", "eval_exact_match", "eval_label_acc"}) {
    if (m.contains(k) && b.contains(k) && m[k].is_number() && b[k].is_number()) {
      out[k] = m[k].get<double>() - b[k].get<double>();
    }
  }
  out["better_than_baseline"] = m["eval_loss"].get<double>() < b.value("eval_loss", 0.0);
  return out;
}

void Checkpoints(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  auto job = OwnJob(ctx, key, req, res, false);
  if (!job) return;
  int64_t limit = 0;
  if (!ReadLimit(req, res, &limit)) return;
  int64_t before = 0;
  if (const std::string after = req.param("after"); !after.empty()) {
    const std::optional<CheckpointName> name = ParseCheckpointName(after);
    if (!name || name->job_id != job->id) {
      return SendStatus(res, Status(Code::kInvalidArgument,
                                    "after must be one of this job's checkpoint ids (ftckpt-...)", "after"));
    }
    before = name->step;
  }
  auto cps = ctx.md.ListCheckpoints(job->id, before, limit + 1);
  if (!cps.ok()) return SendStatus(res, cps.status());
  const std::string job_id = job->id, suffix = SuffixOf(job->spec);
  SendJson(res, 200, Page(cps.value(), limit, [&job_id, &suffix](const CheckpointRecord& c) -> Json {
             return {{"object", "fine_tuning.job.checkpoint"},
                     {"id", CheckpointId(job_id, c.step)},
                     {"created_at", c.created_at},
                     {"fine_tuned_model_checkpoint", CheckpointModelName(job_id, c.step, suffix)},
                     {"step_number", c.step},
                     {"metrics", c.metrics},
                     {"vs_baseline", VsBaseline(c.metrics)},
                     {"fine_tuning_job_id", job_id},
                     {"kinds", {"sampler", "state"}},
                     {"object_prefix", c.prefix}};
           }));
}

void Logs(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res,
          std::optional<bool> eval) {
  auto job = OwnJob(ctx, key, req, res, eval);
  if (!job) return;
  int64_t limit = 0;
  if (!ReadLimit(req, res, &limit)) return;
  int64_t after = 0;
  if (const std::string a = req.param("after"); !a.empty()) {
    char* end = nullptr;
    after = std::strtoll(a.c_str(), &end, 10);
    if (*end != '\0' || after < 0) {
      return SendStatus(
          res, Status(Code::kInvalidArgument, "after must be a log line's seq (an integer)", "after"));
    }
  }
  auto logs = ctx.md.ListLogs(job->id, after, limit + 1);
  if (!logs.ok()) return SendStatus(res, logs.status());
  Json page = Page(logs.value(), limit, [](const LogRecord& l) -> Json {
    return {{"seq", l.seq}, {"attempt", l.attempt}, {"created_at", l.created_at}, {"text", l.text}};
  });
  // Done: the job is over and no attempt is still winding down.
  bool done = IsTerminal(job->status);
  if (done) {
    for (const auto& a : ctx.md.ListAttempts(job->id).ValueOrThrow()) done = done && a.outcome.has_value();
  }
  page["done"] = done && !page["has_more"].get<bool>();
  SendJson(res, 200, page);
}

}  // namespace

std::optional<JobRecord> OwnJobOfKind(ApiContext& ctx, const ApiKey& key, const http::Request& req,
                                      http::Response& res, std::optional<TaskKind> kind) {
  auto job = OrAnswer(ctx.md.GetJob(key.org_id, req.matches[1]), res);
  if (job && kind && job->kind() != *kind) {
    const bool batch = *kind == TaskKind::kBatch;
    SendStatus(res, Status(Code::kNotFound, (batch ? "no batch " : "no job ") + job->id,
                           batch ? "batch_id" : "job_id"));
    return std::nullopt;
  }
  return job;
}

void AddJobRoutes(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  const std::string job = "/v1/fine_tuning/jobs/{}";
  routes.Post("/v1/fine_tuning/jobs",
              [c](const ApiKey& k, const auto& q, auto& r) { Create(*c, k, q, r, false); });
  routes.Post("/v1/fine_tuning/jobs/estimate",
              [c](const ApiKey& k, const auto& q, auto& r) { Estimate(*c, k, q, r); });
  routes.Get("/v1/fine_tuning/jobs",
             [c](const ApiKey& k, const auto& q, auto& r) { List(*c, k, q, r, false); });
  routes.Get(job, [c](const ApiKey& k, const auto& q, auto& r) { Get(*c, k, q, r, false); });
  // Cancel, events and logs by job id serve evaluations too (`burst logs`
  // takes either id); the /v1/evals routes serve evaluations only.
  routes.Post(job + "/cancel",
              [c](const ApiKey& k, const auto& q, auto& r) { Cancel(*c, k, q, r, std::nullopt); });
  routes.Post(job + "/pause",
              [c](const ApiKey& k, const auto& q, auto& r) { PauseOrResume(*c, k, q, r, true); });
  routes.Post(job + "/resume",
              [c](const ApiKey& k, const auto& q, auto& r) { PauseOrResume(*c, k, q, r, false); });
  routes.Get(job + "/events",
             [c](const ApiKey& k, const auto& q, auto& r) { Events(*c, k, q, r, std::nullopt); });
  routes.Get(job + "/checkpoints",
             [c](const ApiKey& k, const auto& q, auto& r) { Checkpoints(*c, k, q, r); });
  routes.Get(job + "/logs",
             [c](const ApiKey& k, const auto& q, auto& r) { Logs(*c, k, q, r, std::nullopt); });
  const std::string eval = "/v1/evals/{}";
  routes.Post("/v1/evals", [c](const ApiKey& k, const auto& q, auto& r) { Create(*c, k, q, r, true); });
  routes.Get("/v1/evals", [c](const ApiKey& k, const auto& q, auto& r) { List(*c, k, q, r, true); });
  routes.Get(eval, [c](const ApiKey& k, const auto& q, auto& r) { Get(*c, k, q, r, true); });
  routes.Post(eval + "/cancel", [c](const ApiKey& k, const auto& q, auto& r) { Cancel(*c, k, q, r, true); });
  routes.Get(eval + "/events", [c](const ApiKey& k, const auto& q, auto& r) { Events(*c, k, q, r, true); });
  routes.Get(eval + "/logs", [c](const ApiKey& k, const auto& q, auto& r) { Logs(*c, k, q, r, true); });
}

}  // namespace burst
