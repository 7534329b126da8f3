#include "api/deployments.h"

#include <algorithm>
#include <cmath>

#include "api/models.h"
#include "api/sample_request.h"
#include "core/fs.h"
#include "core/ids.h"

namespace burst {
namespace {

int64_t IntIn(FieldReader& f, const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  const long long v = f.Int(key, def);
  if (v < lo || v > hi)
    BadField(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + " (got " +
                      std::to_string(v) + ")");
  return v;
}

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 63) return false;
  if (!std::isalnum(static_cast<unsigned char>(n[0]))) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  }
  return n.rfind("ftjob-", 0) != 0 && n.rfind("ftckpt-", 0) != 0 && n.rfind("dep-", 0) != 0;
}

}  // namespace

DeploymentRecord ParseDeploymentRequest(const Json& body, const std::string& org_id, Metadata& md,
                                        const std::vector<std::filesystem::path>& model_roots,
                                        const SlotPool& pool, const ObjectStore* store) {
  if (!body.is_object()) BadField("body", "must be a JSON object");
  FieldReader f(body, "");
  DeploymentRecord d;
  d.name = f.String("name", "");
  if (!ValidName(d.name)) {
    BadField("name",
             "required: 1-63 letters, digits, '-', '_' or '.', starting with a letter or digit, and not "
             "starting with "
             "ftjob-, ftckpt- or dep- (got \"" +
                 d.name + "\")");
  }
  const std::string checkpoint = f.String("checkpoint", "");
  if (checkpoint.empty())
    BadField("checkpoint", "required: a checkpoint (JOB:step-N or ftckpt-...) or a model name");
  // Replicas at once: CPU slots, or the GPUs of the best claim its `gpu` can have.
  const GpuRequest gpu = ParseGpuRequest(f.Raw("gpu"), "gpu");
  int64_t max_slots = pool.cpu_slots;
  if (gpu.Asks()) {
    max_slots = 0;
    for (const DeviceClaim& c : ResolveGpuRequest(gpu, pool, 1, "gpu"))
      max_slots = std::max(max_slots, pool.gpus.at(c.type) / c.count);
  }
  const int64_t max_replicas = IntIn(f, "max_replicas", 1, 1, std::max<int64_t>(1, max_slots));
  const int64_t min_replicas = IntIn(f, "min_replicas", 0, 0, max_replicas);
  const double window = f.Number("scaledown_window_s", 60.0);
  if (!(window >= 1 && window <= 86400))
    BadField("scaledown_window_s", "must be between 1 and 86400 seconds");
  const int64_t max_concurrency = IntIn(f, "max_concurrency", 1, 1, 256);
  const std::string scope_asked = f.String("scope", "");
  f.RejectUnknown();
  SampleTarget t;
  try {
    t = ResolveSampleModel(checkpoint, org_id, md, model_roots, store);
  } catch (const Error& e) {
    // The same message, about this request's field.
    std::string msg = e.status().message();
    if (msg.rfind("model: ", 0) == 0) msg = msg.substr(7);
    throw Error(e.status().code(), "checkpoint: " + msg, "checkpoint");
  }
  // Replicas kept live (min_replicas > 0) are capacity held whether called or
  // not: dedicated scope only.
  const ModelInfo entry = CatalogEntryFor(t.base_model, model_roots);
  CheckDeviceAgainstCatalog(entry, gpu.Asks());
  const std::optional<BillingScope> asked = AskedScope(scope_asked);
  ScopeChoice scope;
  if (min_replicas > 0 && asked != BillingScope::kDedicated) {
    const std::string why =
        "min_replicas " + std::to_string(min_replicas) + " keeps replicas live whether called or not";
    if (asked == BillingScope::kServerless) {
      throw Error(Code::kInvalidArgument,
                  "scope: serverless is not available: " + why + " (dedicated scope only)", "scope");
    }
    scope = {BillingScope::kDedicated, "picked: " + why};
  } else {
    scope = ChooseScope(asked, entry, t.full ? "full" : "lora");
  }
  d.id = NewId("dep");
  d.org_id = org_id;
  d.request = {{"name", d.name},
               {"checkpoint", checkpoint},
               {"min_replicas", min_replicas},
               {"max_replicas", max_replicas},
               {"scaledown_window_s", window},
               {"max_concurrency", max_concurrency},
               {"scope", scope_asked}};
  if (gpu.Asks()) d.request["gpu"] = GpuRequestJson(gpu);
  d.request_sha256 = Sha256Hex(d.request.dump());
  d.target = {{"base_model", t.base_model},
              {"checkpoint_prefix", t.checkpoint_prefix},
              {"full", t.full},
              {"checkpoint", checkpoint},
              {"scope", ToString(scope.scope)},
              {"scope_reason", scope.reason}};
  return d;
}

Json DeploymentJson(const DeploymentRecord& d, const Json& state, const UsageSum& billed, int64_t now_ms) {
  const double open_s = state.value("open_seconds", 0.0);
  const Json replicas = state.value("replicas", Json::array());
  const int64_t since_ms = d.last_request_ms ? d.last_request_ms : d.created_at * 1000;
  Json out = {{"id", d.id},
              {"object", "deployment"},
              {"name", d.name},
              {"status", d.deleted_at ? "deleted" : "active"},
              {"created_at", d.created_at},
              {"deleted_at", d.deleted_at ? Json(d.deleted_at) : Json()},
              {"checkpoint", d.request.value("checkpoint", "")},
              {"min_replicas", d.request.value("min_replicas", 0)},
              {"max_replicas", d.request.value("max_replicas", 1)},
              {"scaledown_window_s", d.request.value("scaledown_window_s", 60.0)},
              {"max_concurrency", d.request.value("max_concurrency", 1)},
              {"gpu", d.request.value("gpu", Json())},
              {"scope", ToString(RecordedScope(d.target, "deployment " + d.id).ValueOrThrow())},
              {"scope_reason", d.target.value("scope_reason", "")},
              {"replicas", static_cast<int64_t>(replicas.size())},
              {"ready_replicas",
               static_cast<int64_t>(std::count_if(replicas.begin(), replicas.end(),
                                                  [](const Json& r) { return r.value("ready", false); }))},
              {"replica_workers", replicas},
              {"busy", state.value("busy", 0)},
              {"waiting", state.value("waiting", 0)},
              {"requests", d.requests},
              {"cold_starts", d.cold_starts},
              {"last_request_at", d.last_request_ms ? Json(d.last_request_ms / 1000) : Json()},
              {"idle_s", d.deleted_at ? Json() : Json(std::max<int64_t>(0, now_ms - since_ms) / 1000)},
              {"replica_seconds", billed.seconds + open_s},
              {"cost", billed.cost + state.value("open_cost", 0.0)}};
  return out;
}

}  // namespace burst
