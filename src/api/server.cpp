#include "api/server.h"

#include <httplib.h>

#include <chrono>
#include <map>
#include <ctime>
#include <set>

#include "api/job_request.h"
#include "api/sample_request.h"
#include "api/deployments.h"
#include "api/estimate.h"
#include "api/models.h"
#include "api/sweeps.h"
#include "core/fs.h"
#include "core/ids.h"
#include "core/json.h"
#include "train/data.h"

namespace burst {
namespace {

int HttpStatus(Code code) {
  switch (code) {
    case Code::kInvalidArgument: return 400;
    case Code::kNotFound: return 404;
    case Code::kAlreadyExists: return 409;
    case Code::kFailedPrecondition: return 409;
    case Code::kResourceExhausted: return 429;
    case Code::kUnavailable: return 503;
    case Code::kUnimplemented: return 501;
    default: return 500;
  }
}

void SendJson(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void SendError(httplib::Response& res, int status, const std::string& code, const std::string& message,
               const std::string& param = "") {
  SendJson(res, status,
           {{"error", {{"code", code}, {"message", message}, {"param", param.empty() ? Json() : Json(param)}}}});
}

void SendStatus(httplib::Response& res, const Status& s) {
  // An organisation's cap: 429 org_cap naming the limit (retrying does not
  // help, unlike 429 capacity).
  if (s.code() == Code::kResourceExhausted && s.param().rfind("org_cap:", 0) == 0) {
    return SendError(res, 429, "org_cap", s.message(), s.param().substr(8));
  }
  SendError(res, HttpStatus(s.code()), CodeName(s.code()), s.message(), s.param());
}

Json FileJson(const FileRecord& f) {
  return {{"id", f.id},           {"object", "file"},         {"bytes", f.bytes},
          {"created_at", f.created_at}, {"filename", f.filename}, {"purpose", f.purpose},
          {"status", "processed"}, {"sha256", f.sha256},        {"format", f.format},
          {"examples", f.examples}};
}

// ?limit= in 1..10000 (default 100); false after answering 400.
bool ReadLimit(const httplib::Request& req, httplib::Response& res, int64_t* limit) {
  *limit = 100;
  if (!req.has_param("limit")) return true;
  const std::string v = req.get_param_value("limit");
  char* end = nullptr;
  *limit = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || *limit < 1 || *limit > 10000) {
    SendError(res, 400, "invalid_argument", "limit must be an integer in 1..10000", "limit");
    return false;
  }
  return true;
}

// The request body as a JSON object; nullopt after answering 400 (or 413:
// JSON requests are small; only uploads may use --max-body-mb).
constexpr size_t kMaxJsonBody = 4 << 20;
std::optional<Json> ReadBody(const httplib::Request& req, httplib::Response& res) {
  if (req.body.size() > kMaxJsonBody) {
    SendError(res, 413, "resource_exhausted",
              "JSON request body of " + std::to_string(req.body.size()) + " bytes is over the limit of " +
                  std::to_string(kMaxJsonBody) + " bytes",
              "body");
    return std::nullopt;
  }
  Json body = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    SendError(res, 400, "invalid_argument", "the request body must be a JSON object", "body");
    return std::nullopt;
  }
  return body;
}

std::string Param(const httplib::Request& req, const std::string& name) {
  return req.has_param(name) ? req.get_param_value(name) : "";
}

// "YYYY-MM-DD" as unix seconds at 00:00 UTC; -1 when malformed, 0 when empty.
int64_t ParseDay(const std::string& day) {
  if (day.empty()) return 0;
  std::tm tm{};
  const char* end = strptime(day.c_str(), "%Y-%m-%d", &tm);
  if (!end || *end != '\0') return -1;
  return static_cast<int64_t>(timegm(&tm));
}

// A list page in OpenAI's shape: the first `limit` rows, rendered (the query
// asked for limit + 1 rows, so one more means has_more).
template <typename Row, typename Render>
Json Page(const std::vector<Row>& rows, int64_t limit, Render render) {
  Json data = Json::array();
  for (size_t i = 0; i < rows.size() && static_cast<int64_t>(i) < limit; ++i) data.push_back(render(rows[i]));
  return {{"object", "list"}, {"data", data}, {"has_more", static_cast<int64_t>(rows.size()) > limit}};
}

bool TerminalStatus(const std::string& s) { return s == "succeeded" || s == "failed" || s == "cancelled"; }

std::string CheckpointId(const std::string& job_id, int64_t step) {
  return "ftckpt-" + job_id.substr(job_id.find('-') + 1) + "-" + std::to_string(step);
}

}  // namespace

struct ApiServer::Impl {
  Metadata& md;
  ObjectStore& store;
  Runtime& rt;
  ServerOptions opt;
  httplib::Server http;
  int bound_port = -1;

  Impl(Metadata& m, ObjectStore& s, Runtime& r, ServerOptions o) : md(m), store(s), rt(r), opt(std::move(o)) {}

  // The caller's API key, or nullopt after answering 401.
  std::optional<ApiKey> Auth(const httplib::Request& req, httplib::Response& res) {
    std::string h = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    if (h.rfind(bearer, 0) != 0) {
      SendError(res, 401, "unauthenticated", "missing \"Authorization: Bearer <API key>\" header",
                "authorization");
      return std::nullopt;
    }
    auto key = md.Authenticate(h.substr(bearer.size()));
    if (!key.ok()) {
      if (key.status().code() == Code::kNotFound) {
        SendError(res, 401, "unauthenticated", "invalid or revoked API key", "authorization");
      } else {
        SendStatus(res, key.status());
      }
      return std::nullopt;
    }
    return key.value();
  }

  void UploadFile(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    if (!req.is_multipart_form_data()) {
      return SendError(res, 400, "invalid_argument", "upload a file as multipart/form-data", "file");
    }
    if (!req.has_file("file")) return SendError(res, 400, "invalid_argument", "missing the \"file\" part", "file");
    const std::string purpose = req.has_file("purpose") ? req.get_file_value("purpose").content : "";
    if (purpose != "fine-tune") {
      return SendError(res, 400, "invalid_argument",
                       "purpose must be \"fine-tune\" (got \"" + purpose + "\")", "purpose");
    }
    const httplib::MultipartFormData& part = req.get_file_value("file");
    std::string filename = part.filename.empty() ? "upload.jsonl" : part.filename;
    DataFileCheck check;
    Status s = Try([&] { check = CheckDataBytes(part.content, filename); });
    if (!s.ok()) return SendStatus(res, s);

    FileRecord f;
    f.id = NewId("file");
    f.org_id = key->org_id;
    f.filename = filename;
    f.purpose = purpose;
    f.bytes = static_cast<int64_t>(part.content.size());
    f.sha256 = check.sha256;
    f.format = check.format;
    f.examples = check.examples;
    f.object_key = "orgs/" + key->org_id + "/files/" + f.id;
    if (Status put = store.Put(f.object_key, part.content); !put.ok()) return SendStatus(res, put);
    if (Status rec = md.CreateFile(f); !rec.ok()) {
      store.Delete(f.object_key);  // nothing half-made
      return SendStatus(res, rec);
    }
    SendJson(res, 200, FileJson(f));
  }

  void ListFiles(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    int64_t limit = 0;
    if (!ReadLimit(req, res, &limit)) return;
    const std::string after = req.has_param("after") ? req.get_param_value("after") : "";
    auto files = md.ListFiles(key->org_id, after, limit + 1);
    if (!files.ok()) return SendStatus(res, files.status());
    SendJson(res, 200, Page(files.value(), limit, FileJson));
  }

  void GetFile(const httplib::Request& req, httplib::Response& res, bool content) {
    auto key = Auth(req, res);
    if (!key) return;
    auto f = md.GetFile(key->org_id, req.matches[1]);
    if (!f.ok()) return SendStatus(res, f.status());
    if (!content) return SendJson(res, 200, FileJson(f.value()));
    auto bytes = store.Get(f.value().object_key);
    if (!bytes.ok()) return SendStatus(res, bytes.status());
    res.status = 200;
    res.set_content(bytes.value(), "application/octet-stream");
  }

  void DeleteFile(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto f = md.GetFile(key->org_id, req.matches[1]);
    if (!f.ok()) return SendStatus(res, f.status());
    // The record goes first: a file is gone once nothing refers to it; bytes
    // that outlive a crash here are unreachable and harmless.
    if (Status s = md.DeleteFile(key->org_id, f.value().id); !s.ok()) return SendStatus(res, s);
    store.Delete(f.value().object_key);
    SendJson(res, 200, {{"id", f.value().id}, {"object", "file"}, {"deleted", true}});
  }

  // --------------------------------------------------------------------------
  // fine-tuning jobs

  Json RenderJob(const JobRecord& job) {
    auto attempts = md.ListAttempts(job.id);
    auto usage = md.JobUsage(job.id);
    return JobJson(job, attempts.ok() ? attempts.value() : std::vector<AttemptRecord>{},
                   usage.ok() ? usage.value() : UsageLine{});
  }

  Json RenderEval(const JobRecord& job) {
    auto usage = md.JobUsage(job.id);
    return EvalJson(job, usage.ok() ? usage.value() : UsageLine{});
  }
  static bool IsEval(const JobRecord& job) { return job.spec.value("kind", "") == "eval"; }

  // POST /v1/fine_tuning/jobs/estimate: the job checked as if created, and
  // its expected tokens, time and cost; nothing is created.
  void EstimateJob(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto body = ReadBody(req, res);
    if (!body) return;
    JobRequestContext ctx{key->org_id, &md, opt.model_roots, rt.options().threads_per_slot};
    Json out;
    Status s = Try([&] {
      ParsedJob parsed = ParseJobRequest(*body, ctx);
      auto train = md.GetFile(key->org_id, parsed.spec.value("training_file", ""));
      if (!train.ok()) throw Error(train.status());
      const ModelInfo model = CatalogEntryFor(parsed.spec.value("base_model", ""), opt.model_roots);
      const RuntimeOptions& ro = rt.options();
      out = burst::EstimateJob(parsed, train.value(), model, key->org_id, md,
                               EstimatePrices{ro.price_per_slot_second, ro.price_train_per_mtok, ro.threads_per_slot,
                                              ro.slot_type});
    });
    if (!s.ok()) return SendStatus(res, s);
    SendJson(res, 200, out);
  }

  // POST /v1/fine_tuning/jobs, or with eval POST /v1/evals (a job of kind
  // "eval", api/job_request.h).
  void CreateJob(const httplib::Request& req, httplib::Response& res, bool eval = false) {
    auto key = Auth(req, res);
    if (!key) return;
    auto body = ReadBody(req, res);
    if (!body) return;
    const std::string idem = req.get_header_value("Idempotency-Key");
    if (idem.size() > 256) return SendError(res, 400, "invalid_argument", "Idempotency-Key over 256 characters", "idempotency_key");
    JobRequestContext ctx{key->org_id, &md, opt.model_roots, rt.options().threads_per_slot};
    ParsedJob parsed;
    Status parse = Try([&] { parsed = eval ? ParseEvalRequest(*body, ctx) : ParseJobRequest(*body, ctx); });
    if (!parse.ok()) return SendStatus(res, parse);
    JobRecord job;
    job.id = NewId(eval ? "eval" : "ftjob");
    job.org_id = key->org_id;
    job.idempotency_key = idem;
    job.request_sha256 = Sha256Hex(body->dump());
    job.spec = std::move(parsed.spec);
    job.total_steps = parsed.total_steps;
    bool created = false;
    auto rec = rt.Submit(std::move(job), &created);
    if (!rec.ok()) return SendStatus(res, rec.status());
    SendJson(res, 200, eval ? RenderEval(rec.value()) : RenderJob(rec.value()));
  }

  // r's value, or nullopt after answering with its error.
  template <typename T>
  static std::optional<T> OrAnswer(Result<T> r, httplib::Response& res) {
    if (!r.ok()) {
      SendStatus(res, r.status());
      return std::nullopt;
    }
    return std::move(r).value();
  }

  // The caller's job named in the path, or nullopt after answering.
  std::optional<JobRecord> OwnJob(const httplib::Request& req, httplib::Response& res, const ApiKey& key) {
    return OrAnswer(md.GetJob(key.org_id, req.matches[1]), res);
  }

  void GetJob(const httplib::Request& req, httplib::Response& res, bool eval = false) {
    auto key = Auth(req, res);
    if (!key) return;
    auto job = OwnJob(req, res, *key);
    if (!job) return;
    if (IsEval(*job) != eval) return SendStatus(res, Status(Code::kNotFound, "no job " + job->id, "job_id"));
    SendJson(res, 200, eval ? RenderEval(*job) : RenderJob(*job));
  }

  void ListJobs(const httplib::Request& req, httplib::Response& res, bool eval = false) {
    auto key = Auth(req, res);
    if (!key) return;
    int64_t limit = 0;
    if (!ReadLimit(req, res, &limit)) return;
    auto jobs = md.ListJobs(key->org_id, Param(req, "after"), limit + 1, eval ? "eval" : "train");
    if (!jobs.ok()) return SendStatus(res, jobs.status());
    SendJson(res, 200, Page(jobs.value(), limit, [this, eval](const JobRecord& j) {
               return eval ? RenderEval(j) : RenderJob(j);
             }));
  }

  void CancelJob(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto job = rt.Cancel(key->org_id, req.matches[1]);
    if (!job.ok()) return SendStatus(res, job.status());
    SendJson(res, 200, IsEval(job.value()) ? RenderEval(job.value()) : RenderJob(job.value()));
  }

  void ListEvents(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto job = OwnJob(req, res, *key);
    if (!job) return;
    int64_t limit = 0;
    if (!ReadLimit(req, res, &limit)) return;
    const std::string order = req.has_param("order") ? Param(req, "order") : "desc";
    if (order != "asc" && order != "desc") {
      return SendError(res, 400, "invalid_argument", "order must be asc or desc", "order");
    }
    auto events = md.ListEvents(job->id, Param(req, "after"), limit + 1, order == "asc");
    if (!events.ok()) return SendStatus(res, events.status());
    SendJson(res, 200, Page(events.value(), limit, [](const EventRecord& e) -> Json {
               return {{"object", "fine_tuning.job.event"}, {"id", "ftevent-" + std::to_string(e.seq)},
                       {"created_at", e.created_at},         {"level", e.level},
                       {"type", e.type},                     {"message", e.message},
                       {"data", e.data}};
             }));
  }

  // A checkpoint's held-out metrics against the base model's (both in its
  // metrics when the job has a validation file): each difference, and
  // whether its eval loss is lower. Null without both.
  static Json VsBaseline(const Json& m) {
    const Json& b = m.is_object() ? m.value("baseline", Json()) : Json();
    if (!b.is_object() || !m.contains("eval_loss")) return Json();
    Json out = Json::object();
    for (const char* k : {"eval_loss", "eval_token_acc", "eval_exact_match", "eval_label_acc"}) {
      if (m.contains(k) && b.contains(k) && m[k].is_number() && b[k].is_number()) {
        out[k] = m[k].get<double>() - b[k].get<double>();
      }
    }
    out["better_than_baseline"] = m["eval_loss"].get<double>() < b.value("eval_loss", 0.0);
    return out;
  }

  void ListCheckpoints(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto job = OwnJob(req, res, *key);
    if (!job) return;
    int64_t limit = 0;
    if (!ReadLimit(req, res, &limit)) return;
    int64_t before = 0;
    const std::string after = Param(req, "after");
    if (!after.empty()) {
      size_t dash = after.rfind('-');
      before = dash == std::string::npos ? 0 : std::strtoll(after.c_str() + dash + 1, nullptr, 10);
      if (before <= 0) return SendError(res, 400, "invalid_argument", "no checkpoint " + after, "after");
    }
    auto cps = md.ListCheckpoints(job->id, before, limit + 1);
    if (!cps.ok()) return SendStatus(res, cps.status());
    const std::string job_id = job->id;
    SendJson(res, 200, Page(cps.value(), limit, [&job_id](const CheckpointRecord& c) -> Json {
               return {{"object", "fine_tuning.job.checkpoint"},
                       {"id", CheckpointId(job_id, c.step)},
                       {"created_at", c.created_at},
                       {"fine_tuned_model_checkpoint", job_id + ":step-" + std::to_string(c.step)},
                       {"step_number", c.step},
                       {"metrics", c.metrics},
                       {"vs_baseline", VsBaseline(c.metrics)},
                       {"fine_tuning_job_id", job_id},
                       {"kinds", {"sampler", "state"}},
                       {"object_prefix", c.prefix}};
             }));
  }

  void ListLogs(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto job = OwnJob(req, res, *key);
    if (!job) return;
    int64_t limit = 0;
    if (!ReadLimit(req, res, &limit)) return;
    const int64_t after = std::strtoll(Param(req, "after").c_str(), nullptr, 10);
    auto logs = md.ListLogs(job->id, after, limit + 1);
    if (!logs.ok()) return SendStatus(res, logs.status());
    Json page = Page(logs.value(), limit, [](const LogRecord& l) -> Json {
      return {{"seq", l.seq}, {"attempt", l.attempt}, {"created_at", l.created_at}, {"text", l.text}};
    });
    // Done: the job is over and no attempt is still winding down.
    bool done = TerminalStatus(job->status);
    if (done) {
      auto attempts = md.ListAttempts(job->id);
      if (attempts.ok())
        for (const auto& a : attempts.value()) done = done && !a.outcome.empty();
    }
    page["done"] = done && !page["has_more"].get<bool>();
    SendJson(res, 200, page);
  }

  // --------------------------------------------------------------------------
  // sweeps (api/sweeps.h): one job body fanned out over a grid; each point is
  // an ordinary job whose spec carries "sweep_id"

  void SendSweep(httplib::Response& res, const SweepRecord& sweep, const std::string& metric) {
    Json out;
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    if (Status s = Try([&] { out = SweepJson(sweep, LoadSweepRuns(md, sweep), metric, now_ms); }); !s.ok()) {
      return SendStatus(res, s);
    }
    SendJson(res, 200, out);
  }

  void CreateSweep(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto body = ReadBody(req, res);
    if (!body) return;
    const std::string idem = req.get_header_value("Idempotency-Key");
    if (idem.size() > 256) return SendError(res, 400, "invalid_argument", "Idempotency-Key over 256 characters", "idempotency_key");
    const std::string metric = Param(req, "metric");
    // Every point is checked before anything is created.
    JobRequestContext ctx{key->org_id, &md, opt.model_roots, rt.options().threads_per_slot};
    std::vector<Json> bodies;
    std::vector<ParsedJob> parsed;
    SweepRecord sweep;
    Status s = Try([&] {
      CheckSweepMetric(metric);
      const std::vector<SweepPoint> points = ExpandSweep(*body);
      for (size_t i = 0; i < points.size(); ++i) {
        bodies.push_back(PointJobBody((*body)["job"], points[i]));
        try {
          parsed.push_back(ParseJobRequest(bodies.back(), ctx));
        } catch (const Error& e) {
          throw Error(SweepPointError(e.status(), points[i], i));
        }
        sweep.runs.push_back({{"job_id", NewId("ftjob")}, {"overrides", points[i].overrides}});
      }
    });
    if (!s.ok()) return SendStatus(res, s);
    sweep.id = NewId("sweep");
    sweep.org_id = key->org_id;
    sweep.idempotency_key = idem;
    sweep.request_sha256 = Sha256Hex(body->dump());
    sweep.request = *body;
    // An organisation's cap on active jobs (burst serve --org-max-jobs) holds
    // for the whole sweep: one that would pass it is refused before anything
    // exists (a replay of an accepted sweep is not new).
    if (const int cap = rt.options().max_active_jobs_per_org; cap > 0) {
      auto prev = md.FindSweepByKey(key->org_id, idem);
      if (!prev.ok()) return SendStatus(res, prev.status());
      auto active = md.ListActiveJobs();
      if (!active.ok()) return SendStatus(res, active.status());
      int64_t n = 0;
      for (const JobRecord& j : active.value()) n += j.org_id == key->org_id;
      const int64_t adding = prev.value() ? 0 : static_cast<int64_t>(parsed.size());
      if (adding > 0 && n + adding > cap) {
        return SendStatus(res, Status(Code::kResourceExhausted,
                                      "this sweep's " + std::to_string(adding) + " jobs and your organisation's " +
                                          std::to_string(n) + " queued or running would pass its limit (" +
                                          std::to_string(cap) + "); wait for jobs to end, or sweep fewer points",
                                      "org_cap:max_active_jobs"));
      }
    }
    bool created = false;
    auto rec = md.CreateSweep(std::move(sweep), &created);
    if (!rec.ok()) return SendStatus(res, rec.status());
    // The jobs, each idempotent on (sweep, index): the same request again
    // (same Idempotency-Key and body) creates what an interrupted one did not.
    const SweepRecord& sw = rec.value();
    for (size_t i = 0; !sw.cancelled_at && i < parsed.size() && i < sw.runs.size(); ++i) {
      JobRecord job;
      job.id = sw.runs[i].value("job_id", "");
      job.org_id = key->org_id;
      job.idempotency_key = sw.id + "/" + std::to_string(i);
      job.request_sha256 = Sha256Hex(bodies[i].dump());
      job.spec = std::move(parsed[i].spec);
      job.spec["sweep_id"] = sw.id;
      job.total_steps = parsed[i].total_steps;
      bool job_created = false;
      auto j = rt.Submit(std::move(job), &job_created);
      if (!j.ok()) {
        // A new sweep that cannot be created whole (another request took the
        // organisation's last places meanwhile) is cancelled, jobs and all.
        if (created) {
          md.CancelSweep(key->org_id, sw.id, std::time(nullptr));
          for (size_t k = 0; k < i; ++k) rt.Cancel(key->org_id, sw.runs[k].value("job_id", ""));
        }
        return SendStatus(res, j.status());
      }
    }
    SendSweep(res, sw, metric);
  }

  // The caller's sweep named in the path, or nullopt after answering.
  std::optional<SweepRecord> OwnSweep(const httplib::Request& req, httplib::Response& res, const ApiKey& key) {
    return OrAnswer(md.GetSweep(key.org_id, req.matches[1]), res);
  }

  void GetSweep(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    if (auto sweep = OwnSweep(req, res, *key)) SendSweep(res, *sweep, Param(req, "metric"));
  }

  void ListSweeps(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    int64_t limit = 0;
    if (!ReadLimit(req, res, &limit)) return;
    const std::string metric = Param(req, "metric");
    auto sweeps = md.ListSweeps(key->org_id, Param(req, "after"), limit + 1);
    if (!sweeps.ok()) return SendStatus(res, sweeps.status());
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    Json page;
    Status s = Try([&] {
      page = Page(sweeps.value(), limit,
                  [&](const SweepRecord& sw) { return SweepJson(sw, LoadSweepRuns(md, sw), metric, now_ms); });
    });
    if (!s.ok()) return SendStatus(res, s);
    SendJson(res, 200, page);
  }

  void CancelSweep(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto sweep = OwnSweep(req, res, *key);
    if (!sweep) return;
    std::vector<SweepRunView> runs;
    if (Status s = Try([&] { runs = LoadSweepRuns(md, *sweep); }); !s.ok()) return SendStatus(res, s);
    const std::string status = SweepStatus(*sweep, runs);
    if (status != "running") {
      return SendError(res, 409, "failed_precondition", "sweep " + sweep->id + " has already " + status, "sweep_id");
    }
    // Marked first, so that a repeated create request makes no more jobs.
    auto marked = md.CancelSweep(key->org_id, sweep->id, std::time(nullptr));
    if (!marked.ok()) return SendStatus(res, marked.status());
    for (const SweepRunView& r : runs) {
      if (!r.job || TerminalStatus(r.job->status)) continue;
      auto c = rt.Cancel(key->org_id, r.job_id);
      // A job that ended meanwhile keeps its outcome.
      if (!c.ok() && c.status().code() != Code::kFailedPrecondition) return SendStatus(res, c.status());
    }
    auto now = md.GetSweep(key->org_id, sweep->id);
    if (!now.ok()) return SendStatus(res, now.status());
    SendSweep(res, now.value(), Param(req, "metric"));
  }

  void Workers(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    Json pool = rt.WorkersJson();
    // The pool is shared; which job a worker runs is shown to its owner only.
    for (Json& w : pool["data"]) {
      if (!w["job"].is_string()) continue;
      auto job = md.GetJob(key->org_id, w["job"].get<std::string>());
      if (!job.ok()) w["job"] = "(another organisation)";
    }
    if (Param(req, "include") == "exited") {
      // Workers that have left, as far as they served this organisation:
      // their observed lifetime and the seconds billed to it, by line.
      auto billed = md.UsageByWorker(key->org_id);
      auto all = md.ListWorkers(false);
      if (!billed.ok()) return SendStatus(res, billed.status());
      if (!all.ok()) return SendStatus(res, all.status());
      Json exited = Json::array();
      for (const WorkerRecord& w : all.value()) {
        auto it = billed.value().find(w.id);
        if (w.state != "exited" || it == billed.value().end()) continue;
        Json lines = Json::object();
        for (const auto& [line, ms] : it->second) lines[line] = static_cast<double>(ms) / 1000.0;
        exited.push_back({{"id", w.id},
                          {"object", "worker"},
                          {"state", "exited"},
                          {"slot", w.slot},
                          {"requested_ms", w.requested_ms},
                          {"started_ms", w.started_ms ? Json(w.started_ms) : Json()},
                          {"exited_ms", w.exited_ms},
                          {"exit_reason", w.exit_reason},
                          {"billed_seconds", lines}});
      }
      pool["exited"] = exited;
    }
    SendJson(res, 200, pool);
  }

  void Usage(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    const int64_t start = ParseDay(Param(req, "start"));
    int64_t end = ParseDay(Param(req, "end"));
    if (start < 0) return SendError(res, 400, "invalid_argument", "start must be YYYY-MM-DD", "start");
    if (end < 0) return SendError(res, 400, "invalid_argument", "end must be YYYY-MM-DD", "end");
    if (end > 0) end += 86400;  // inclusive
    auto lines = md.SumUsage(key->org_id, start, end);
    if (!lines.ok()) return SendStatus(res, lines.status());
    Json data = Json::array();
    double seconds = 0, cost = 0;
    for (const auto& l : lines.value()) {
      data.push_back({{"day", l.day}, {"line", l.line}, {"scope", l.scope}, {"seconds", l.seconds},
                      {"tokens", l.tokens}, {"cost", l.cost}});
      seconds += l.seconds;
      cost += l.cost;
    }
    // Each run's three budget lines: training and sampling, evaluation,
    // deployment (a run is a fine-tuning job; spend on its checkpoints is its).
    auto by_run = md.UsageByRun(key->org_id, start, end);
    if (!by_run.ok()) return SendStatus(res, by_run.status());
    Json runs = Json::array();
    std::map<std::string, size_t> at;
    for (const UsageLine& l : by_run.value()) {
      const std::string& run = l.day;  // UsageByRun puts the run id there
      if (!at.count(run)) {
        at[run] = runs.size();
        runs.push_back({{"run", run.empty() ? Json() : Json(run)},
                        {"training_and_sampling", 0.0},
                        {"evaluation", 0.0},
                        {"deployment", 0.0},
                        {"idle", 0.0},
                        {"total", 0.0}});
      }
      Json& r = runs[at[run]];
      const char* budget = l.line == "evaluation"   ? "evaluation"
                           : l.line == "deployment" ? "deployment"
                           : l.line == "idle"       ? "idle"
                                                    : "training_and_sampling";
      r[budget] = r[budget].get<double>() + l.cost;
      r["total"] = r["total"].get<double>() + l.cost;
    }
    const RuntimeOptions& ro = rt.options();
    SendJson(res, 200,
             {{"object", "list"},
              {"data", data},
              {"runs", runs},
              {"total_seconds", seconds},
              {"total_cost", cost},
              {"prices", PricesJson(ro)}});
  }

  static Json PricesJson(const RuntimeOptions& ro) {
    return {{"dedicated", {{ro.slot_type, {{"per_slot_second", ro.price_per_slot_second},
                                           {"per_slot_hour", ro.price_per_slot_second * 3600}}}}},
            {"serverless", {{"train_per_mtok", ro.price_train_per_mtok},
                            {"prefill_per_mtok", ro.price_prefill_per_mtok},
                            {"sample_per_mtok", ro.price_sample_per_mtok}}}};
  }

  // The price table, and per model the trained tokens per second this
  // organisation's finished jobs measured (null: none yet).
  void Prices(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    Json measured = Json::object();
    Status s = Try([&] {
      const std::vector<JobRecord> recent = RecentJobs(key->org_id, md);
      for (const ModelInfo& m : LoadCatalog(opt.model_roots)) {
        auto [tps, jobs] = MeasuredThroughput(m.path, rt.options().threads_per_slot, recent);
        measured[m.id] = jobs ? Json{{"tokens_per_slot_second", tps}, {"jobs", jobs}} : Json();
      }
    });
    if (!s.ok()) return SendStatus(res, s);
    SendJson(res, 200, {{"object", "prices"}, {"prices", PricesJson(rt.options())}, {"slots", rt.options().slots},
                        {"threads_per_slot", rt.options().threads_per_slot}, {"throughput", measured}});
  }

  void Models(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    Json data = Json::array();
    std::vector<ModelInfo> catalog;
    if (Status s = Try([&] { catalog = LoadCatalog(opt.model_roots); }); !s.ok()) return SendStatus(res, s);
    for (const ModelInfo& m : catalog) data.push_back(m.ToJson());
    SendJson(res, 200, {{"object", "list"}, {"data", data}});
  }

  // --------------------------------------------------------------------------
  // deployments (api/deployments.h; the scheduling is Runtime's)

  static int64_t NowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  Json RenderDeployment(const DeploymentRecord& d) {
    auto billed = md.JobUsage(d.id);
    return DeploymentJson(d, rt.DeploymentState(d.id, d.target.value("scope", "dedicated")),
                          billed.ok() ? billed.value() : UsageLine{}, NowMs());
  }

  void CreateDeployment(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto body = ReadBody(req, res);
    if (!body) return;
    DeploymentRecord d;
    Status s = Try([&] { d = ParseDeploymentRequest(*body, key->org_id, md, opt.model_roots, rt.options().slots); });
    if (!s.ok()) return SendStatus(res, s);
    bool created = false;
    auto rec = rt.CreateDeployment(std::move(d), &created);
    if (!rec.ok()) return SendStatus(res, rec.status());
    SendJson(res, 200, RenderDeployment(rec.value()));
  }

  void ListDeployments(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto deps = md.ListDeployments(key->org_id, Param(req, "include") == "deleted");
    if (!deps.ok()) return SendStatus(res, deps.status());
    Json data = Json::array();
    for (const DeploymentRecord& d : deps.value()) data.push_back(RenderDeployment(d));
    SendJson(res, 200, {{"object", "list"}, {"data", data}});
  }

  void GetDeployment(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    if (auto d = OrAnswer(md.GetDeployment(key->org_id, req.matches[1]), res)) SendJson(res, 200, RenderDeployment(*d));
  }

  // Stops every replica at once; answers when they have exited (or after
  // 10 s), so the object it returns shows the final cost.
  void DeleteDeployment(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto d = rt.DeleteDeployment(key->org_id, req.matches[1]);
    if (!d.ok()) return SendStatus(res, d.status());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!rt.DeploymentState(d.value().id, "")["replicas"].empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto after = md.GetDeployment(key->org_id, d.value().id);
    SendJson(res, 200, RenderDeployment(after.ok() ? after.value() : d.value()));
  }

  // --------------------------------------------------------------------------
  // sampling (OpenAI's completions and chat completions)

  void Complete(const httplib::Request& req, httplib::Response& res, bool chat) {
    auto key = Auth(req, res);
    if (!key) return;
    auto body = ReadBody(req, res);
    if (!body) return;
    Json request;
    SampleTarget target;
    std::optional<DeploymentRecord> dep;
    Status s = Try([&] {
      request = ParseSampleRequest(*body, chat);
      const std::string model = request["model"].get<std::string>();
      // A deployment's name (or id) first: its replicas serve the checkpoint
      // it was created with.
      if (auto d = md.GetDeployment(key->org_id, model); d.ok()) {
        if (d.value().deleted_at) throw Error(Code::kNotFound, "model: deployment " + model + " was deleted", "model");
        dep = d.value();
        const Json& t = dep->target;
        target = SampleTarget{t.value("base_model", ""), t.value("checkpoint_prefix", ""), t.value("full", false)};
      } else {
        target = ResolveSampleModel(model, key->org_id, md, opt.model_roots);
      }
    });
    if (!s.ok()) return SendStatus(res, s);
    auto call = std::make_shared<SampleCall>();
    const std::string scope_asked = request.value("scope", "");
    request.erase("scope");  // the worker samples; the scope is the runtime's
    if (dep) {
      call->deployment = dep->id;
      call->scope = dep->target.value("scope", "dedicated");
      if (!scope_asked.empty() && scope_asked != call->scope) {
        return SendStatus(res, Status(Code::kInvalidArgument,
                                      "scope: deployment " + dep->name + " is billed in " + call->scope +
                                          " scope; its calls cannot ask for " + scope_asked,
                                      "scope"));
      }
    } else {
      Status sc = Try([&] {
        call->scope = ChooseScope(scope_asked, CatalogEntryFor(target.base_model, opt.model_roots),
                                  target.full ? "full" : "lora")
                          .scope;
      });
      if (!sc.ok()) return SendStatus(res, sc);
    }
    call->run = RunOfCheckpointPrefix(target.checkpoint_prefix);
    call->id = NewId(chat ? "chatcmpl" : "cmpl");
    call->org_id = key->org_id;
    call->base_model = target.base_model;
    call->task = {{"request", request}, {"checkpoint_prefix", target.checkpoint_prefix}, {"full", target.full}};
    const auto t0 = std::chrono::steady_clock::now();
    call->stream = request.value("stream", false);
    call = rt.Sample(call, opt.sample_wait_ms, /*until_started=*/call->stream);
    if (!call->error.ok()) {
      if (call->error.param() == "capacity") {
        res.set_header("Retry-After", "5");
        return SendJson(res, 429,
                        {{"error", {{"code", "capacity"}, {"message", call->error.message()}, {"param", Json()}}},
                         {"retry_after", 5}});
      }
      return SendStatus(res, call->error);
    }
    if (call->stream) return Stream(res, call, request, chat);
    const double total_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double load_ms = call->result.is_object() ? call->result.value("load_ms", 0.0) : 0.0;
    Json extra = {{"worker", call->worker},
                  {"scope", call->scope},
                  {"cold_start", call->cold},
                  {"queue_ms", call->started_ms - call->created_ms},
                  {"load_ms", load_ms},
                  // What the caller waited for a worker to start and load the model.
                  {"cold_start_ms", call->cold ? static_cast<double>(call->started_ms - call->created_ms) + load_ms
                                               : 0.0},
                  {"run_ms", call->finished_ms - call->started_ms},
                  {"total_ms", total_ms}};
    if (dep) extra["deployment"] = dep->name;
    const std::string model = request["model"].get<std::string>();
    const int64_t created = call->created_ms / 1000;
    SendJson(res, 200,
             chat ? RenderChatCompletion(call->id, model, request, call->result, created, extra)
                  : RenderCompletion(call->id, model, request, call->result, created, extra));
  }

  // Server-sent events as OpenAI sends them: one `data: {chunk}` per piece
  // the worker streams, then `data: [DONE]`. Holds this request's thread.
  void Stream(httplib::Response& res, std::shared_ptr<SampleCall> call, const Json& request, bool chat) {
    const std::string model = request["model"].get<std::string>();
    const int64_t created = call->created_ms / 1000;
    auto started = std::make_shared<std::set<int64_t>>();  // choices that have sent their first chunk
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [this, call, request, chat, model, created, started](size_t, httplib::DataSink& sink) {
          bool done = false;
          for (const Json& piece : rt.NextChunks(call, 1000, &done)) {
            const int64_t index = piece.value("index", int64_t{0});
            Json chunk = RenderStreamChunk(call->id, model, request, piece, created, chat, !started->count(index));
            if (chunk.is_null()) continue;
            started->insert(index);
            std::string line = "data: " + chunk.dump() + "\n\n";
            if (!sink.write(line.data(), line.size())) return false;
          }
          if (!done) return true;
          if (!call->error.ok()) {
            std::string line = "data: " +
                               Json{{"error", {{"code", CodeName(call->error.code())},
                                               {"message", call->error.message()},
                                               {"param", call->error.param().empty() ? Json() : Json(call->error.param())}}}}
                                   .dump() +
                               "\n\n";
            sink.write(line.data(), line.size());
          }
          const std::string end = "data: [DONE]\n\n";
          sink.write(end.data(), end.size());
          sink.done();
          return true;
        });
  }

  // --------------------------------------------------------------------------
  // the workers' protocol

  std::optional<std::string> WorkerAuth(const httplib::Request& req, httplib::Response& res) {
    std::string h = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    auto id = h.rfind(bearer, 0) == 0 ? rt.AuthenticateWorker(h.substr(bearer.size()))
                                      : Result<std::string>(Status(Code::kNotFound, ""));
    if (!id.ok()) {
      SendError(res, 401, "unauthenticated", "invalid worker token", "authorization");
      return std::nullopt;
    }
    return id.value();
  }

  void SendWorkerStatus(httplib::Response& res, const Status& s) {
    if (s.param() == "lease_lost") return SendError(res, 409, "lease_lost", s.message(), "attempt");
    SendStatus(res, s);
  }

  void Internal(const httplib::Request& req, httplib::Response& res, const std::string& what) {
    auto worker = WorkerAuth(req, res);
    if (!worker) return;
    auto body = ReadBody(req, res);
    if (!body) return;
    Status s = Try([&] {
      const Json& b = *body;
      if (what == "register") {
        auto r = rt.Register(*worker, b.value("pid", int64_t{0}));
        if (!r.ok()) return SendWorkerStatus(res, r.status());
        return SendJson(res, 200, r.value());
      }
      if (what == "lease") {
        const int64_t wait = std::clamp<int64_t>(b.value("wait_ms", int64_t{1000}), 0, 30'000);
        auto r = rt.Lease(*worker, b.value("model", Json()).is_string() ? b["model"].get<std::string>() : "", wait);
        if (!r.ok()) return SendWorkerStatus(res, r.status());
        if (!r.value()) {
          res.status = 204;
          return;
        }
        const Json& v = *r.value();
        return SendJson(res, 200, v.contains("action") ? v : Json{{"task", v}});
      }
      if (what == "sample_result") {
        Status st = rt.SampleResult(*worker, b.value("id", std::string()), b.value("result", Json()),
                                    b.value("error", Json()));
        return st.ok() ? SendJson(res, 200, {{"ok", true}}) : SendWorkerStatus(res, st);
      }
      if (what == "sample_chunks") {
        Status st = rt.SampleChunks(*worker, b.value("id", std::string()), b.value("chunks", Json::array()));
        return st.ok() ? SendJson(res, 200, {{"ok", true}}) : SendWorkerStatus(res, st);
      }
      if (what == "exit") {
        Status st = rt.WorkerExiting(*worker, b.value("reason", std::string("exiting")));
        return st.ok() ? SendJson(res, 200, {{"ok", true}}) : SendWorkerStatus(res, st);
      }
      const std::string job = b.at("job").get<std::string>();
      const int64_t attempt = b.at("attempt").get<int64_t>();
      if (what == "heartbeat") {
        auto r = rt.Heartbeat(*worker, job, attempt, b.value("step", int64_t{0}));
        if (!r.ok()) return SendWorkerStatus(res, r.status());
        return SendJson(res, 200, {{"action", r.value()}});
      }
      Status st;
      if (what == "events") {
        std::vector<EventRecord> events;
        for (const Json& e : b.value("events", Json::array())) {
          EventRecord r;
          r.level = e.value("level", std::string("info"));
          r.type = e.value("type", std::string("message"));
          r.message = e.value("message", std::string());
          r.data = e.value("data", Json());
          r.created_at = e.value("created_at", int64_t{0});
          events.push_back(std::move(r));
        }
        std::vector<std::string> logs;
        for (const Json& l : b.value("logs", Json::array())) logs.push_back(l.get<std::string>());
        st = rt.Events(*worker, job, attempt, std::move(events), std::move(logs));
      } else if (what == "checkpoint") {
        st = rt.Checkpoint(*worker, job, attempt, b.at("step").get<int64_t>(), b.value("metrics", Json::object()));
      } else if (what == "finish") {
        st = rt.Finish(*worker, job, attempt, b.at("outcome").get<std::string>(), b.value("error", Json()),
                       b.value("retryable", false), b.value("step", int64_t{0}), b.value("trained_tokens", int64_t{0}),
                       b.value("result", Json()));
      }
      if (!st.ok()) return SendWorkerStatus(res, st);
      SendJson(res, 200, {{"ok", true}});
    });
    if (!s.ok()) SendStatus(res, s);
  }

  void Routes() {
    const int threads = opt.threads;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    http.set_payload_max_length(static_cast<size_t>(opt.max_body_bytes));
    // httplib's default also sets SO_REUSEPORT, which lets a second server
    // bind the same port and silently take half the requests (a second
    // `burst serve` with another --data would then answer for the first).
    // SO_REUSEADDR alone keeps quick restarts possible and makes a busy port
    // an error.
    // TCP_NODELAY (inherited by accepted connections): httplib writes headers
    // and body separately, and with Nagle each small response waited ~40 ms
    // for the client's delayed ACK (docs/bench.md, "Serverless runtime").
    http.set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    });
    http.Get("/v1/health", [](const httplib::Request&, httplib::Response& res) {
      SendJson(res, 200, {{"status", "ok"}});
    });
    http.Post("/v1/files", [this](const auto& req, auto& res) { UploadFile(req, res); });
    http.Get("/v1/files", [this](const auto& req, auto& res) { ListFiles(req, res); });
    http.Get(R"(/v1/files/([A-Za-z0-9_-]+))", [this](const auto& req, auto& res) { GetFile(req, res, false); });
    http.Get(R"(/v1/files/([A-Za-z0-9_-]+)/content)",
             [this](const auto& req, auto& res) { GetFile(req, res, true); });
    http.Delete(R"(/v1/files/([A-Za-z0-9_-]+))", [this](const auto& req, auto& res) { DeleteFile(req, res); });
    const std::string job = R"(/v1/fine_tuning/jobs/([A-Za-z0-9_-]+))";
    http.Post("/v1/fine_tuning/jobs", [this](const auto& req, auto& res) { CreateJob(req, res); });
    http.Post("/v1/fine_tuning/jobs/estimate", [this](const auto& req, auto& res) { EstimateJob(req, res); });
    http.Get("/v1/fine_tuning/jobs", [this](const auto& req, auto& res) { ListJobs(req, res); });
    http.Get(job, [this](const auto& req, auto& res) { GetJob(req, res); });
    http.Post(job + "/cancel", [this](const auto& req, auto& res) { CancelJob(req, res); });
    http.Get(job + "/events", [this](const auto& req, auto& res) { ListEvents(req, res); });
    http.Get(job + "/checkpoints", [this](const auto& req, auto& res) { ListCheckpoints(req, res); });
    http.Get(job + "/logs", [this](const auto& req, auto& res) { ListLogs(req, res); });
    const std::string sweep = R"(/v1/sweeps/([A-Za-z0-9_-]+))";
    http.Post("/v1/sweeps", [this](const auto& req, auto& res) { CreateSweep(req, res); });
    http.Get("/v1/sweeps", [this](const auto& req, auto& res) { ListSweeps(req, res); });
    http.Get(sweep, [this](const auto& req, auto& res) { GetSweep(req, res); });
    http.Post(sweep + "/cancel", [this](const auto& req, auto& res) { CancelSweep(req, res); });
    const std::string eval = R"(/v1/evals/([A-Za-z0-9_-]+))";
    http.Post("/v1/evals", [this](const auto& req, auto& res) { CreateJob(req, res, true); });
    http.Get("/v1/evals", [this](const auto& req, auto& res) { ListJobs(req, res, true); });
    http.Get(eval, [this](const auto& req, auto& res) { GetJob(req, res, true); });
    http.Post(eval + "/cancel", [this](const auto& req, auto& res) { CancelJob(req, res); });
    http.Get(eval + "/events", [this](const auto& req, auto& res) { ListEvents(req, res); });
    http.Get(eval + "/logs", [this](const auto& req, auto& res) { ListLogs(req, res); });
    const std::string deployment = R"(/v1/deployments/([A-Za-z0-9._-]+))";
    http.Post("/v1/deployments", [this](const auto& req, auto& res) { CreateDeployment(req, res); });
    http.Get("/v1/deployments", [this](const auto& req, auto& res) { ListDeployments(req, res); });
    http.Get(deployment, [this](const auto& req, auto& res) { GetDeployment(req, res); });
    http.Delete(deployment, [this](const auto& req, auto& res) { DeleteDeployment(req, res); });
    http.Get("/v1/workers", [this](const auto& req, auto& res) { Workers(req, res); });
    http.Get("/v1/usage", [this](const auto& req, auto& res) { Usage(req, res); });
    http.Get("/v1/models", [this](const auto& req, auto& res) { Models(req, res); });
    http.Get("/v1/prices", [this](const auto& req, auto& res) { Prices(req, res); });
    http.Post("/v1/completions", [this](const auto& req, auto& res) { Complete(req, res, false); });
    http.Post("/v1/chat/completions", [this](const auto& req, auto& res) { Complete(req, res, true); });
    for (const char* what :
         {"register", "lease", "heartbeat", "events", "checkpoint", "finish", "exit", "sample_result", "sample_chunks"}) {
      http.Post(std::string("/internal/v1/") + what,
                [this, w = std::string(what)](const auto& req, auto& res) { Internal(req, res, w); });
    }
    // Errors httplib answers itself (unknown route, body too large) get the
    // same JSON shape as ours.
    const int64_t max_body = opt.max_body_bytes;
    http.set_error_handler([max_body](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413) {
        SendError(res, 413, "resource_exhausted",
                  "request body over the limit of " + std::to_string(max_body) + " bytes");
      } else if (res.status == 404) {
        SendError(res, 404, "not_found", "no route " + req.method + " " + req.path);
      } else {
        SendError(res, res.status, "http_" + std::to_string(res.status), "request failed");
      }
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      Status s;
      try {
        std::rethrow_exception(ep);
      } catch (...) {
        s = CurrentExceptionToStatus();
      }
      SendStatus(res, s);
    });
  }
};

ApiServer::ApiServer(Metadata& metadata, ObjectStore& store, Runtime& runtime, ServerOptions options)
    : impl_(std::make_unique<Impl>(metadata, store, runtime, std::move(options))) {
  impl_->Routes();
}

ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Bind() {
  int port = impl_->opt.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(impl_->opt.host);
    if (port < 0) port = -1;
  } else if (!impl_->http.bind_to_port(impl_->opt.host, port)) {
    port = -1;
  }
  if (port < 0) {
    return Status(Code::kUnavailable,
                  "cannot listen on " + impl_->opt.host + ":" + std::to_string(impl_->opt.port) +
                      " (address in use or not available)",
                  "listen");
  }
  impl_->bound_port = port;
  return Status();
}

int ApiServer::port() const { return impl_->bound_port; }

void ApiServer::Serve() { impl_->http.listen_after_bind(); }

void ApiServer::Stop() {
  if (impl_ && impl_->http.is_running()) impl_->http.stop();
}

}  // namespace burst
