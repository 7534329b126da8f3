// The workers' protocol (/internal/v1, docs/api.md "Workers"): register,
// lease, heartbeat, events, checkpoint, finish, exit, and the answers to
// sampling calls (sample_chunks: a streamed call's pieces, or a batch's
// in one post; sample_result; sample_join: calls joining a batch being
// decoded). Every route needs the worker's token; a malformed body is 400
// naming the field, like any other request.
#include "api/context.h"
#include "core/metrics.h"

namespace burst {
namespace {

// The streamed calls one sample_chunks post may carry (a worker's batch has
// at most its decoder's rows: 32 by default).
constexpr size_t kMaxChunkCalls = 256;

// Required fields of a worker's body, read strictly (kInvalidArgument
// naming the field when absent or of another type).
std::string Required(FieldReader& f, const std::string& key) {
  if (!f.Has(key)) BadField(key, "required");
  return f.String(key, "");
}
int64_t RequiredInt(FieldReader& f, const std::string& key) {
  if (!f.Has(key)) BadField(key, "required");
  return f.Int(key, 0);
}
// What a worker, or the state checkpoint it reports, computes with
// ("blas_library", "blas": what state.json records); absent = unknown
// (an older worker). Bounded: they live as long as the worker or task.
BlasFacts ReadBlas(FieldReader& f) {
  BlasFacts b{f.String("blas_library", ""), f.String("blas", "")};
  if (b.library.size() > 256) BadField("blas_library", "longer than 256 characters");
  if (b.kernels.size() > 64) BadField("blas", "longer than 64 characters");
  return b;
}
Json Array(FieldReader& f, const std::string& key) {
  Json v = f.Raw(key);
  if (v.is_null()) return Json::array();
  if (!v.is_array()) BadField(key, "must be an array");
  return v;
}

void SendWorkerResult(http::Response& res, const Status& s) {
  if (!s.ok()) return SendStatus(res, s);
  SendJson(res, 200, {{"ok", true}});
}

void Handle(ApiContext& ctx, const std::string& what, const std::string& worker, const http::Request& req,
            http::Response& res) {
  auto body = ReadBody(req, res);
  if (!body) return;
  FieldReader f(*body, "");
  Runtime& rt = ctx.rt;
  if (what == "register") {
    const std::string device = f.String("device", "");
    auto r = rt.Register(worker, f.Int("pid", 0), f.Int("started_ms", 0), ReadBlas(f), device);
    if (!r.ok()) return SendStatus(res, r.status());
    return SendJson(res, 200, r.value());
  }
  if (what == "lease") {
    const int64_t wait = std::clamp<int64_t>(f.Int("wait_ms", 1000), 0, 30'000);
    const Json model = f.Raw("model");
    // What the worker holds loaded: a handful, as it keeps a few (bounded
    // so a worker token cannot make the scheduler scan a huge list).
    std::vector<std::string> checkpoints;
    const Json held = Array(f, "checkpoints");
    if (held.size() > 64) BadField("checkpoints", "lists more than 64 checkpoints");
    for (const Json& c : held) {
      if (!c.is_string()) BadField("checkpoints", "must be an array of strings");
      checkpoints.push_back(c.get<std::string>());
    }
    std::vector<std::string> loops;  // loop sessions it keeps in memory
    const Json sessions = Array(f, "loops");
    if (sessions.size() > 256) BadField("loops", "lists more than 256 sessions");
    for (const Json& c : sessions) {
      if (!c.is_string()) BadField("loops", "must be an array of strings");
      loops.push_back(c.get<std::string>());
    }
    auto r = rt.Lease(worker, model.is_string() ? model.get<std::string>() : "", wait, checkpoints, loops);
    if (!r.ok()) return SendStatus(res, r.status());
    if (!r.value()) {
      res.status = 204;
      return;
    }
    const Json& v = *r.value();
    return SendJson(res, 200, v.contains("action") ? v : Json{{"task", v}});
  }
  if (what == "sample_join") {  // a worker decoding a batch asks for calls that joined it
    auto r = rt.JoinSample(worker);
    if (!r.ok()) return SendStatus(res, r.status());
    if (!r.value()) {
      res.status = 204;
      return;
    }
    return SendJson(res, 200, Json{{"task", *r.value()}});
  }
  if (what == "sample_result") {
    return SendWorkerResult(res, rt.SampleResult(worker, Required(f, "id"), f.Raw("result"), f.Raw("error")));
  }
  if (what == "sample_chunks" && f.Has("calls")) {
    // Every streamed call of a worker's batch in one post: {"calls": [{"id",
    // "chunks"}]}; the answer names the calls to stop (cancelled, or no longer
    // this worker's).
    // Every call read first: a malformed one applies none of the pieces.
    const Json calls = Array(f, "calls");
    if (calls.size() > kMaxChunkCalls)
      BadField("calls", "at most " + std::to_string(kMaxChunkCalls) + " calls");
    std::vector<std::pair<std::string, Json>> pieces;
    for (const Json& c : calls) {
      if (!c.is_object()) BadField("calls", "each call must be an object");
      FieldReader cf(c, "calls[]");
      std::string id = Required(cf, "id");
      pieces.emplace_back(std::move(id), Array(cf, "chunks"));
    }
    Json stop = Json::array();
    for (const auto& [id, chunks] : pieces) {
      bool cancel = false;
      Status s = rt.SampleChunks(worker, id, chunks, &cancel);
      if (s.code() == Code::kFailedPrecondition || cancel) {
        stop.push_back(id);
      } else if (!s.ok()) {
        return SendStatus(res, s);
      }
    }
    return SendJson(res, 200, {{"ok", true}, {"stop", stop}});
  }
  if (what == "sample_chunks") {
    bool cancel = false;
    if (Status s = rt.SampleChunks(worker, Required(f, "id"), Array(f, "chunks"), &cancel); !s.ok()) {
      return SendStatus(res, s);
    }
    // The caller went away: the worker stops sampling.
    return SendJson(res, 200, {{"ok", true}, {"cancel", cancel}});
  }
  if (what == "exit") return SendWorkerResult(res, rt.WorkerExiting(worker, f.String("reason", "exiting")));
  if (what == "loop_snapshot") {  // a worker parking a run it held before it leaves
    return SendWorkerResult(
        res, ctx.loops->Parked(Required(f, "run"), Required(f, "prefix"), RequiredInt(f, "version")));
  }

  const std::string job = Required(f, "job");
  const int64_t attempt = RequiredInt(f, "attempt");
  if (what == "heartbeat") {
    auto r = rt.Heartbeat(worker, job, attempt, f.Int("step", 0));
    if (!r.ok()) return SendStatus(res, r.status());
    return SendJson(res, 200, {{"action", r.value()}});
  }
  if (what == "events") {
    std::vector<EventRecord> events;
    for (const Json& e : Array(f, "events")) {
      if (!e.is_object()) BadField("events", "each event must be an object");
      FieldReader ef(e, "events[]");
      EventRecord r;
      r.level = ef.String("level", "info");
      r.type = ef.String("type", "message");
      r.message = ef.String("message", "");
      r.data = ef.Raw("data");
      r.created_at = ef.Int("created_at", 0);
      events.push_back(std::move(r));
    }
    std::vector<std::string> logs;
    for (const Json& l : Array(f, "logs")) {
      if (!l.is_string()) BadField("logs", "each log line must be a string");
      logs.push_back(l.get<std::string>());
    }
    return SendWorkerResult(res, rt.Events(worker, job, attempt, std::move(events), std::move(logs)));
  }
  if (what == "rendezvous") {  // one job on many workers: rank 0 publishes, the others wait for it
    auto r =
        rt.Rendezvous(worker, job, attempt, f.String("address", ""), f.Int("wait_ms", 0));  // clamped to 30 s
    if (!r.ok()) return SendStatus(res, r.status());
    return SendJson(res, 200, {{"address", r.value().empty() ? Json() : Json(r.value())}});
  }
  if (what == "checkpoint") {
    Json metrics = f.Raw("metrics");
    if (metrics.is_null()) metrics = Json::object();
    const int64_t bytes = f.Int("bytes", 0);
    const double upload_s = f.Number("upload_s", 0.0);
    Status s = rt.Checkpoint(worker, job, attempt, RequiredInt(f, "step"), metrics, ReadBlas(f));
    if (s.ok()) {
      Metrics& m = Metrics::Default();
      m.Add("burst_checkpoints_total");
      m.Add("burst_checkpoint_bytes_total", {}, static_cast<double>(std::max<int64_t>(0, bytes)));
      m.Observe("burst_checkpoint_upload_seconds", {}, std::max(0.0, upload_s));
    }
    return SendWorkerResult(res, s);
  }
  // finish
  return SendWorkerResult(
      res, rt.Finish(worker, job, attempt, Required(f, "outcome"), f.Raw("error"), f.Bool("retryable", false),
                     f.Int("step", 0), f.Int("trained_tokens", 0), f.Raw("result")));
}

}  // namespace

void AddInternalRoutes(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  for (const char* what : {"register", "lease", "heartbeat", "events", "checkpoint", "finish", "exit",
                           "sample_result", "sample_chunks", "sample_join", "loop_snapshot", "rendezvous"}) {
    routes.Internal(std::string("/internal/v1/") + what,
                    [c, w = std::string(what)](const std::string& worker, const auto& req, auto& res) {
                      Handle(*c, w, worker, req, res);
                    });
  }
}

}  // namespace burst
