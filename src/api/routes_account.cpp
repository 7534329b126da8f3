// What an organisation sees of the shared pool and its own spend: workers
// (/v1/workers), usage (/v1/usage), prices (/v1/prices) and the models it
// may name (/v1/models: the operator's base models, its fine-tuned
// checkpoints and its deployments).
#include <algorithm>
#include <map>

#include "api/context.h"
#include "api/estimate.h"
#include "api/models.h"
#include "api/sample_request.h"
#include "store/keys.h"

namespace burst {
namespace {

void Workers(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  // The pool is shared: another organisation's work shows only as busy.
  Json pool = ctx.rt.WorkersJson(key.org_id);
  if (req.param("include") == "exited") {
    // Workers that have left, as far as they served this organisation:
    // their observed lifetime and the seconds billed to it, by line.
    auto billed = ctx.md.UsageByWorker(key.org_id);
    if (!billed.ok()) return SendStatus(res, billed.status());
    auto all = ctx.md.ListWorkers(false);
    if (!all.ok()) return SendStatus(res, all.status());
    Json exited = Json::array();
    for (const WorkerRecord& w : all.value()) {
      auto it = billed.value().find(w.id);
      if (w.state != WorkerState::kExited || it == billed.value().end()) continue;
      Json lines = Json::object();
      for (const auto& [line, ms] : it->second)
        lines[std::string(ToString(line))] = static_cast<double>(ms) / 1000.0;
      exited.push_back({{"id", w.id},
                        {"object", "worker"},
                        {"state", ToString(w.state)},
                        {"slot", w.slot},
                        {"device", w.device},
                        {"gpus", w.gpus},
                        {"requested_ms", w.requested_ms},
                        {"started_ms", w.started_ms ? Json(w.started_ms) : Json()},
                        {"queued_ms", w.queued_ms},
                        {"exited_ms", w.exited_ms},
                        {"exit_reason", w.exit_reason},
                        {"billed_seconds", lines}});
    }
    pool["exited"] = exited;
  }
  SendJson(res, 200, pool);
}

Json PricesJson(const RuntimeOptions& ro) {
  Json dedicated = {
      {ro.slot_type,
       {{"per_slot_second", ro.price_per_slot_second}, {"per_slot_hour", ro.price_per_slot_second * 3600}}}};
  // Each GPU type of the pool, per GPU (a worker holding two pays twice).
  for (const auto& [type, n] : CountByType(ro.gpus)) {
    const double per_s =
        DevicePricePerSecond({type, 1}, ro.price_per_slot_second, ro.price_per_gpu_second).value_or(0.0);
    dedicated[type] = {{"per_gpu_second", per_s}, {"per_gpu_hour", per_s * 3600}, {"gpus", n}};
  }
  return {{"dedicated", dedicated},
          {"serverless",
           {{"train_per_mtok", ro.price_train_per_mtok},
            {"prefill_per_mtok", ro.price_prefill_per_mtok},
            {"sample_per_mtok", ro.price_sample_per_mtok},
            {"batch_prefill_per_mtok", ro.price_batch_prefill_per_mtok},
            {"batch_sample_per_mtok", ro.price_batch_sample_per_mtok}}}};
}

void Usage(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  const int64_t start = ParseDay(req.param("start"));
  int64_t end = ParseDay(req.param("end"));
  if (start < 0) return SendStatus(res, Status(Code::kInvalidArgument, "start must be YYYY-MM-DD", "start"));
  if (end < 0) return SendStatus(res, Status(Code::kInvalidArgument, "end must be YYYY-MM-DD", "end"));
  if (end > 0) end += 86400;  // inclusive
  auto lines = ctx.md.SumUsage(key.org_id, start, end);
  if (!lines.ok()) return SendStatus(res, lines.status());
  Json data = Json::array();
  double seconds = 0, cost = 0;
  for (const auto& l : lines.value()) {
    // SumUsage groups by line and scope: both are set.
    data.push_back({{"day", l.day},
                    {"line", ToString(l.line.value())},
                    {"scope", ToString(l.scope.value())},
                    {"device", l.device},
                    {"device_seconds", l.device_seconds},
                    {"seconds", l.seconds},
                    {"tokens", l.tokens},
                    {"cost", l.cost}});
    seconds += l.seconds;
    cost += l.cost;
  }
  // Each run's three budget lines: training and sampling, evaluation,
  // deployment (a run is a fine-tuning job; spend on its checkpoints is its).
  auto by_run = ctx.md.UsageByRun(key.org_id, start, end);
  if (!by_run.ok()) return SendStatus(res, by_run.status());
  Json runs = Json::array();
  std::map<std::string, size_t> at;
  for (const UsageSum& l : by_run.value()) {
    const std::string& run = l.day;  // UsageByRun puts the run id there
    if (!at.count(run)) {
      at[run] = runs.size();
      runs.push_back({{"run", run.empty() ? Json() : Json(run)},
                      {"training_and_sampling", 0.0},
                      {"evaluation", 0.0},
                      {"deployment", 0.0},
                      {"batch", 0.0},
                      {"idle", 0.0},
                      {"total", 0.0}});
    }
    Json& r = runs[at[run]];
    // UsageByRun groups by line, so it is set. Startup, training and
    // sampling share one budget; evaluation, deployment, batch and idle are their own.
    const UsageLine line = l.line.value();
    const bool shared =
        line == UsageLine::kStartup || line == UsageLine::kTraining || line == UsageLine::kSampling;
    const std::string budget = shared ? "training_and_sampling" : std::string(ToString(line));
    r[budget] = r[budget].get<double>() + l.cost;
    r["total"] = r["total"].get<double>() + l.cost;
  }
  SendJson(res, 200,
           {{"object", "list"},
            {"data", data},
            {"runs", runs},
            {"total_seconds", seconds},
            {"total_cost", cost},
            {"prices", PricesJson(ctx.rt.options())}});
}

// The price table, and per model the trained tokens per second this
// organisation's finished jobs measured (null: none yet).
void Prices(ApiContext& ctx, const ApiKey& key, const http::Request&, http::Response& res) {
  Json measured = Json::object();
  Status s = Try([&] {
    const std::vector<JobRecord> recent = RecentJobs(key.org_id, ctx.md);
    for (const ModelInfo& m : LoadCatalog(ctx.opt.model_roots)) {
      auto [tps, jobs] = MeasuredThroughput(m.path, ctx.rt.options().threads_per_slot, recent);
      measured[m.id] = jobs ? Json{{"tokens_per_slot_second", tps}, {"jobs", jobs}} : Json();
    }
  });
  if (!s.ok()) return SendStatus(res, s);
  const RuntimeOptions& ro = ctx.rt.options();
  SendJson(res, 200,
           {{"object", "prices"},
            {"prices", PricesJson(ro)},
            {"slots", ro.slots},
            {"threads_per_slot", ro.threads_per_slot},
            {"throughput", measured}});
}

// At most this many entries in GET /v1/models (base models first, then
// checkpoints newest job first, then deployments): a bound on the answer.
constexpr size_t kMaxModels = 5000;

// A fine-tuned checkpoint as a model: the name sampling takes.
Json CheckpointModel(const std::string& org_id, const CheckpointRecord& c, const std::string& base_model,
                     const std::string& suffix) {
  return {{"id", CheckpointModelName(c.job_id, c.step, suffix)},
          {"object", "model"},
          {"created", c.created_at},
          {"owned_by", org_id},
          {"burst",
           {{"kind", "checkpoint"},
            {"checkpoint_id", CheckpointId(c.job_id, c.step)},
            {"fine_tuning_job_id", c.job_id},
            {"step_number", c.step},
            {"base_model", base_model}}}};
}

Json DeploymentModel(const DeploymentRecord& d) {
  return {{"id", d.name},
          {"object", "model"},
          {"created", d.created_at},
          {"owned_by", d.org_id},
          {"burst", {{"kind", "deployment"}, {"deployment_id", d.id}, {"target", d.target}}}};
}

void Models(ApiContext& ctx, const ApiKey& key, const http::Request&, http::Response& res) {
  std::vector<ModelInfo> catalog;
  if (Status s = Try([&] { catalog = LoadCatalog(ctx.opt.model_roots); }); !s.ok()) return SendStatus(res, s);
  Json data = Json::array();
  for (const ModelInfo& m : catalog) data.push_back(m.ToJson());
  // The organisation's checkpoints, newest job first (one query).
  auto cps = ctx.md.ListOrgCheckpoints(key.org_id,
                                       static_cast<int64_t>(kMaxModels - std::min(data.size(), kMaxModels)));
  if (!cps.ok()) return SendStatus(res, cps.status());
  for (const auto& c : cps.value())
    data.push_back(CheckpointModel(key.org_id, c.checkpoint, c.base_model, c.suffix));
  auto deps = ctx.md.ListDeployments(key.org_id, /*include_deleted=*/false);
  if (!deps.ok()) return SendStatus(res, deps.status());
  for (const DeploymentRecord& d : deps.value()) {
    if (data.size() < kMaxModels) data.push_back(DeploymentModel(d));
  }
  SendJson(res, 200, {{"object", "list"}, {"data", data}});
}

// GET /v1/models/{id}: a base model, one of the organisation's checkpoints
// (JOB:step-N or ftckpt-...) or one of its live deployments, by the name
// sampling takes (the request parser has decoded a %3A already); 404 naming
// `model` for anything else.
void Model(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  // A Hub-style name (ORG/NAME, models.h) spans two path segments.
  const std::string id = req.matches.size() > 2 ? req.matches[1] + "/" + req.matches[2] : req.matches[1];
  const Status missing(Code::kNotFound, "model \"" + id + "\" not found: GET /v1/models lists the names",
                       "model");
  if (const std::optional<CheckpointName> name = ParseCheckpointName(id)) {
    auto job = ctx.md.GetJob(key.org_id, name->job_id);
    if (!job.ok()) return SendStatus(res, job.status().code() == Code::kNotFound ? missing : job.status());
    if (!SuffixMatches(*name, job.value().spec)) return SendStatus(res, missing);
    auto cps = ctx.md.ListCheckpoints(job.value().id, name->step + 1, 1);
    if (!cps.ok()) return SendStatus(res, cps.status());
    if (cps.value().empty() || cps.value()[0].step != name->step) return SendStatus(res, missing);
    return SendJson(res, 200,
                    CheckpointModel(key.org_id, cps.value()[0], job.value().spec.value("model", ""),
                                    SuffixOf(job.value().spec)));
  }
  std::vector<ModelInfo> catalog;
  if (Status s = Try([&] { catalog = LoadCatalog(ctx.opt.model_roots); }); !s.ok()) return SendStatus(res, s);
  for (const ModelInfo& m : catalog) {
    if (m.id == id) return SendJson(res, 200, m.ToJson());
  }
  auto dep = ctx.md.GetDeployment(key.org_id, id);
  if (dep.ok() && dep.value().name == id && dep.value().deleted_at == 0) {
    return SendJson(res, 200, DeploymentModel(dep.value()));
  }
  if (!dep.ok() && dep.status().code() != Code::kNotFound) return SendStatus(res, dep.status());
  SendStatus(res, missing);
}

// DELETE /v1/models/{id}: a fine-tuned checkpoint (JOB:step-N or
// ftckpt-...), as OpenAI deletes a fine-tuned model. Its job must have
// ended, and no live deployment may serve it (409s naming what holds it).
// The manifests go first, so a checkpoint half deleted fails its check
// everywhere rather than serving a mix; then its objects, then its row. A
// failure answers 5xx, and DELETE again finishes the work.
void DeleteModel(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  const std::string id = req.matches[1];
  const Status missing(Code::kNotFound, "model \"" + id + "\" not found: GET /v1/models lists the names",
                       "model");
  const std::optional<CheckpointName> name = ParseCheckpointName(id);
  if (!name) {
    std::vector<ModelInfo> catalog;
    if (Status s = Try([&] { catalog = LoadCatalog(ctx.opt.model_roots); }); !s.ok())
      return SendStatus(res, s);
    for (const ModelInfo& m : catalog) {
      if (m.id == id) {
        return SendStatus(res, Status(Code::kInvalidArgument,
                                      "model: " + id +
                                          " is a base model of this server; only fine-tuned "
                                          "checkpoints are deleted through the API",
                                      "model"));
      }
    }
    auto dep = ctx.md.GetDeployment(key.org_id, id);
    if (dep.ok() && dep.value().deleted_at == 0) {
      return SendStatus(
          res,
          Status(Code::kInvalidArgument,
                 "model: " + id + " is a deployment: DELETE /v1/deployments/" + id + " stops it", "model"));
    }
    return SendStatus(res, missing);
  }
  auto job = ctx.md.GetJob(key.org_id, name->job_id);
  if (!job.ok()) return SendStatus(res, job.status().code() == Code::kNotFound ? missing : job.status());
  if (!SuffixMatches(*name, job.value().spec)) return SendStatus(res, missing);
  if (!IsTerminal(job.value().status)) {
    return SendStatus(
        res, Status(Code::kFailedPrecondition,
                    "model: job " + name->job_id + " is " + std::string(ToString(job.value().status)) +
                        "; its checkpoints can be deleted once it has ended (cancel it first)",
                    "model"));
  }
  auto cps = ctx.md.ListCheckpoints(name->job_id, name->step + 1, 1);
  if (!cps.ok()) return SendStatus(res, cps.status());
  if (cps.value().empty() || cps.value()[0].step != name->step) return SendStatus(res, missing);
  const std::string prefix = cps.value()[0].prefix;
  auto deps = ctx.md.ListDeployments(key.org_id, /*include_deleted=*/false);
  if (!deps.ok()) return SendStatus(res, deps.status());
  for (const DeploymentRecord& d : deps.value()) {
    if (d.target.value("checkpoint_prefix", "") == SamplerPrefix(prefix)) {
      return SendStatus(res,
                        Status(Code::kFailedPrecondition,
                               "model: deployment " + d.name + " serves " + id +
                                   "; delete the deployment first (DELETE /v1/deployments/" + d.name + ")",
                               "model"));
    }
  }
  for (const char* part : {"sampler/", "state/"}) {
    Status s = ctx.store.Delete(prefix + part + "manifest.json");
    if (!s.ok() && s.code() != Code::kNotFound) return SendStatus(res, s);
  }
  if (Status s = ctx.store.DeletePrefix(prefix); !s.ok()) return SendStatus(res, s);
  if (Status s = ctx.md.DeleteCheckpoint(name->job_id, name->step); !s.ok()) {
    return SendStatus(res, s.code() == Code::kNotFound ? missing : s);  // a DELETE beside this one won
  }
  SendJson(res, 200,
           {{"id", CheckpointModelName(name->job_id, name->step, SuffixOf(job.value().spec))},
            {"object", "model"},
            {"deleted", true}});
}

}  // namespace

void AddAccountRoutes(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  routes.Get("/v1/workers", [c](const ApiKey& k, const auto& q, auto& r) { Workers(*c, k, q, r); });
  routes.Get("/v1/usage", [c](const ApiKey& k, const auto& q, auto& r) { Usage(*c, k, q, r); });
  routes.Get("/v1/prices", [c](const ApiKey& k, const auto& q, auto& r) { Prices(*c, k, q, r); });
  routes.Get("/v1/models", [c](const ApiKey& k, const auto& q, auto& r) { Models(*c, k, q, r); });
  routes.Get("/v1/models/{}", [c](const ApiKey& k, const auto& q, auto& r) { Model(*c, k, q, r); });
  routes.Get("/v1/models/{}/{}", [c](const ApiKey& k, const auto& q, auto& r) { Model(*c, k, q, r); });
  routes.Delete("/v1/models/{}", [c](const ApiKey& k, const auto& q, auto& r) { DeleteModel(*c, k, q, r); });
}

}  // namespace burst
