// Sampling (OpenAI's /v1/completions and /v1/chat/completions): a call runs
// on a worker with the base model warm and the checkpoint's adapter swapped
// in, answered whole or streamed as server-sent events. A streaming client
// that goes away cancels its call on the worker.
#include <set>

#include "api/context.h"
#include "api/models.h"
#include "api/sample_request.h"
#include "core/ids.h"
#include "core/metrics.h"
#include "model/sample_render.h"
#include "store/keys.h"

namespace burst {
namespace {

// How often a stream with nothing to send checks that its client is still
// there: a call whose client left is cancelled within about this long.
constexpr int64_t kStreamPollMs = 250;

std::string Event(const Json& data) { return "data: " + DumpJson(data) + "\n\n"; }

// Server-sent events as OpenAI sends them: one `data: {chunk}` per piece the
// worker streams, then `data: [DONE]`.
void Stream(ApiContext& ctx, http::Response& res, const std::shared_ptr<WorkerCall>& call,
            const Json& request, bool chat) {
  res.set_header("Cache-Control", "no-cache");
  res.content_type = "text/event-stream";
  Runtime* rt = &ctx.rt;
  res.stream = [rt, call, request, chat](http::StreamWriter& out) {
    const std::string model = request["model"].get<std::string>();
    const int64_t created = call->created_ms / 1000;
    std::set<int64_t> started;  // choices that have sent their first chunk
    bool done = false;
    while (!done) {
      for (const Json& piece : rt->NextChunks(call, kStreamPollMs, &done)) {
        const int64_t index = piece.value("index", int64_t{0});
        Json chunk = RenderStreamChunk(call->id, model, request, piece, created, chat, !started.count(index));
        if (chunk.is_null()) continue;
        started.insert(index);
        if (!out.Write(Event(chunk))) {
          rt->CancelCall(call);
          return;
        }
      }
      if (!done && out.ClientGone()) {
        rt->CancelCall(call);
        return;
      }
    }
    if (!call->error.ok()) {
      if (!out.Write(Event(ErrorJson(call->error)))) return;
    } else if (request.value("include_usage", false) && call->result.contains("samples")) {
      if (!out.Write(Event(RenderStreamUsage(call->id, model, call->result, created, chat)))) return;
    }
    out.Write("data: [DONE]\n\n");
  };
}

void Complete(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res, bool chat) {
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
    if (auto d = ctx.md.GetDeployment(key.org_id, model); d.ok()) {
      if (d.value().deleted_at)
        throw Error(Code::kNotFound, "model: deployment " + model + " was deleted", "model");
      dep = d.value();
      const Json& t = dep->target;
      target =
          SampleTarget{t.value("base_model", ""), t.value("checkpoint_prefix", ""), t.value("full", false)};
    } else if (d.status().code() != Code::kNotFound) {
      throw Error(d.status());
    } else {
      target = ResolveSampleModel(model, key.org_id, ctx.md, ctx.opt.model_roots, &ctx.store);
    }
  });
  if (!s.ok()) return SendStatus(res, s);
  auto call = std::make_shared<WorkerCall>();
  const std::string scope_asked = request.value("scope", "");
  request.erase("scope");  // the worker samples; the scope is the runtime's
  std::optional<BillingScope> asked;
  if (Status sc = Try([&] { asked = AskedScope(scope_asked); }); !sc.ok()) return SendStatus(res, sc);
  if (dep) {
    call->deployment = dep->id;
    auto scope = RecordedScope(dep->target, "deployment " + dep->id);
    if (!scope.ok()) return SendStatus(res, scope.status());
    call->scope = scope.value();
    if (asked && *asked != call->scope) {
      return SendStatus(res, Status(Code::kInvalidArgument,
                                    "scope: deployment " + dep->name + " is billed in " +
                                        std::string(ToString(call->scope)) +
                                        " scope; its calls cannot ask for " + scope_asked,
                                    "scope"));
    }
  } else {
    Status sc = Try([&] {
      call->scope = ChooseScope(asked, CatalogEntryFor(target.base_model, ctx.opt.model_roots),
                                target.full ? "full" : "lora")
                        .scope;
    });
    if (!sc.ok()) return SendStatus(res, sc);
  }
  // Spend on a checkpoint is its run's.
  call->run = JobOfKey(target.checkpoint_prefix);
  call->id = NewId(chat ? "chatcmpl" : "cmpl");
  call->org_id = key.org_id;
  call->base_model = target.base_model;
  call->task = {{"request", request}, {"checkpoint_prefix", target.checkpoint_prefix}, {"full", target.full}};
  std::string shipped;
  if (Status sh = Try([&] { shipped = ctx.ShippedModel(target.base_model); }); !sh.ok())
    return SendStatus(res, sh);
  if (!shipped.empty()) call->task["model_store"] = shipped;
  const auto t0 = std::chrono::steady_clock::now();
  call->stream = request.value("stream", false);
  call = ctx.rt.Sample(call, ctx.opt.sample_wait_ms, /*until_started=*/call->stream);
  if (!call->error.ok()) return SendStatus(res, call->error);
  Metrics::Default().Observe("burst_dispatch_seconds", {{"kind", "sample"}},
                             static_cast<double>(call->started_ms - call->created_ms) / 1000.0);
  if (call->stream) return Stream(ctx, res, call, request, chat);
  const double total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double load_ms = call->result.is_object() ? call->result.value("load_ms", 0.0) : 0.0;
  Json extra = {
      {"worker", call->worker},
      {"scope", ToString(call->scope)},
      {"cold_start", call->cold},
      {"queue_ms", call->started_ms - call->created_ms},
      {"load_ms", load_ms},
      // What the caller waited for a worker to start and load the model.
      {"cold_start_ms",
       call->cold ? static_cast<double>(call->started_ms - call->created_ms) + load_ms : 0.0},
      {"run_ms", call->finished_ms - call->started_ms},
      {"total_ms", total_ms},
      // Calls its worker decoded together with it, at most (1: alone).
      {"batch_peak", call->result.is_object() ? call->result.value("batch_peak", int64_t{1}) : int64_t{1}}};
  if (dep) extra["deployment"] = dep->name;
  extra["seed"] = request["seed"];  // the one given, or the one drawn: it repeats the call
  const std::string model = request["model"].get<std::string>();
  const int64_t created = call->created_ms / 1000;
  SendJson(res, 200,
           chat ? RenderChatCompletion(call->id, model, request, call->result, created, extra)
                : RenderCompletion(call->id, model, request, call->result, created, extra));
}

}  // namespace

void AddSamplingRoutes(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  routes.Post("/v1/completions",
              [c](const ApiKey& k, const auto& q, auto& r) { Complete(*c, k, q, r, false); });
  routes.Post("/v1/chat/completions",
              [c](const ApiKey& k, const auto& q, auto& r) { Complete(*c, k, q, r, true); });
}

}  // namespace burst
