// Training loops as a service over the tinker SDK's wire protocol
// (/api/v1/..., docs/loops.md and docs/tinker-protocol.md): sessions,
// training runs and their requests (each answered with a future), sampling
// sessions, and retrieve_future's long poll.
//
// Every request is checked here before anything is queued (a failed request
// creates nothing): the run, the data against the model's vocabulary and
// max_seq_len, the loss and its settings, names of checkpoints. The worker
// parses the same bytes again before it computes.
#include <algorithm>

#include "api/context.h"
#include "api/models.h"
#include "api/tinker_wire.h"
#include "core/fs.h"
#include "core/utf8.h"
#include "runtime/loops.h"
#include "store/keys.h"
#include "train/loop_data.h"

namespace burst {
namespace {

// A retrieve_future is held this long at most (the SDK's read timeout is 45 s).
constexpr int64_t kLongPollMs = 25'000;
// forward_backward / forward bodies carry a batch of datums (the SDK sends
// at most about 5 MB of them per request, splitting larger batches).
constexpr int64_t kMaxBatchBody = 8 << 20;

// The run a request names, as the client's organisation may see it.
LoopRunInfo RunOf(ApiContext& ctx, const ApiKey& key, const std::string& model_id) {
  return ctx.loops->RunOrThrow(key.org_id, model_id);
}

void SendFuture(http::Response& res, const std::shared_ptr<LoopFuture>& f) {
  Json body = {{"request_id", f->id}};
  if (!f->run.empty()) body["model_id"] = f->run;
  SendJson(res, 200, body);
}

void Answer(http::Response& res, Result<std::shared_ptr<LoopFuture>> f) {
  if (!f.ok()) return SendStatus(res, f.status());
  SendFuture(res, f.value());
}

// The scope a run asks for in its user_metadata ("scope": "serverless" or
// "dedicated"; the SDK's create_lora_training_client(user_metadata=...)
// sends it); none: Burst picks (ChooseScope).
std::optional<BillingScope> AskedScope(const Json& user_metadata) {
  if (!user_metadata.is_object() || !user_metadata.contains("scope")) return std::nullopt;
  const Json& v = user_metadata["scope"];
  auto scope = FromString<BillingScope>(v.is_string() ? v.get<std::string>() : "");
  if (!scope.ok()) BadField("user_metadata.scope", "must be \"serverless\" or \"dedicated\"");
  return scope.value();
}

// create_model: the base model from the catalog, the LoRA rank it allows.
void CreateModel(ApiContext& ctx, const ApiKey& key, const Json& body, http::Response& res) {
  FieldReader f(body, "");
  LoopRunInfo run;
  run.org_id = key.org_id;
  run.session_id = f.String("session_id", "");
  const int64_t model_seq_id = f.Int("model_seq_id", 0);
  run.base_model_name = f.String("base_model", "");
  const Json lora = f.Raw("lora_config");
  const std::optional<BillingScope> asked = AskedScope(f.Raw("user_metadata"));
  CheckOptimizerConfig(f.Raw("optimizer_config"));
  f.String("type", "create_model");
  f.RejectUnknown();
  if (run.base_model_name.empty()) BadField("base_model", "is required");
  const std::string dir = ResolveBaseModel(run.base_model_name, ctx.opt.model_roots);
  const ModelInfo m = CatalogEntryFor(dir, ctx.opt.model_roots, run.base_model_name);
  run.base_model = dir;
  run.max_seq_len = m.max_seq_len;
  run.vocab_size = VocabSize(dir);
  // No seed given: one of its own for each (session, model_seq_id), the same when the SDK retries.
  const int64_t seed =
      std::stoll(Sha256Hex(run.session_id + "/" + std::to_string(model_seq_id)).substr(0, 7), nullptr, 16);
  run.lora = ParseLoraConfig(lora, m, seed);
  // Serverless asked for and not available: refused, never a fallback.
  run.scope =
      ChooseScope(asked, m, "lora", run.lora.value("rank", int64_t{0}), 0, "user_metadata.scope").scope;
  run.base_model_store = ctx.ShippedModel(dir);
  Answer(res, ctx.loops->CreateRun(run, model_seq_id));
}

// forward_backward / forward: the data checked against the run's model.
void ForwardBackward(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res,
                     bool forward_only_route) {
  // A full share refuses before the body is parsed (its data, packed, takes
  // at least a tenth of the text).
  if (Status room = ctx.loops->RoomFor(key.org_id, static_cast<int64_t>(req.body.size()) / 10); !room.ok()) {
    return SendStatus(res, room);
  }
  FwdBwdRequest r = ParseFwdBwdRequest(req, forward_only_route);
  const LoopRunInfo run = RunOf(ctx, key, r.model_id);
  LoopDataLimits limits{run.vocab_size, run.max_seq_len, kMaxRequestValues / 4};
  ParseLoopData(r.data, r.loss_fn, limits, r.data_path);  // throws naming the field
  const std::map<std::string, double> config = ParseLossConfig(r.loss_fn, r.loss_fn_config, r.config_path);
  Json op = Json::object();  // not an initializer list: that would copy the data
  op["data"] = std::move(r.data);
  op["loss_fn"] = r.loss_fn;
  op["loss_fn_config"] = config;
  Answer(res, ctx.loops->Submit(key.org_id, r.model_id, r.seq_id,
                                r.forward_only ? "forward" : "forward_backward", std::move(op)));
}

void OptimStep(ApiContext& ctx, const ApiKey& key, const Json& body, http::Response& res) {
  FieldReader f(body, "");
  const std::string model_id = CanonicalRunId(f.String("model_id", ""));
  const int64_t seq_id = f.Int("seq_id", 0);
  RefuseOptimizerParams(f.Raw("optimizer_params"));
  Json adam = ParseAdamParams(f.Raw("adam_params"));
  f.String("type", "optim_step");
  f.RejectUnknown();
  RunOf(ctx, key, model_id);
  Answer(res, ctx.loops->Submit(key.org_id, model_id, seq_id, "optim_step", {{"adam_params", adam}}));
}

// save_weights (state) and save_weights_for_sampler (an adapter to sample or deploy).
// save_weights (the run's state), save_weights_for_sampler (its adapter, to
// sample from) and save_weights_external (the adapter in PEFT's layout, to
// download through external_weights_urls): one request on the run each.
void SaveWeights(ApiContext& ctx, const ApiKey& key, const Json& body, http::Response& res,
                 const std::string& type) {
  const bool state = type == "save_weights", sampler = type == "save_weights_for_sampler";
  FieldReader f(body, "");
  const std::string model_id = CanonicalRunId(f.String("model_id", ""));
  const int64_t seq_id = f.Int("seq_id", 0);
  const Json path = f.Raw("path");
  const Json ttl = f.Raw("ttl_seconds");
  const Json sampling_seq = sampler ? f.Raw("sampling_session_seq_id") : Json();
  const bool overwrite = state ? f.Bool("overwrite", false) : false;
  // SDK 0.3x: a sampler save says which weights its sampling client uses.
  if (sampler) {
    const std::string kind = f.String("kind", "snapshot");
    if (kind != "snapshot") {
      BadField("kind", "Burst saves snapshots (fixed weights); \"" + ToValidUtf8(kind.substr(0, 32)) +
                           "\" sampling clients are not available");
    }
  }
  if (!state && !sampler) {
    const Json age = f.Raw("age_encryption_recipients");
    if (!age.is_null() && !(age.is_array() && age.empty()))
      BadField("age_encryption_recipients", "is not available in Burst: the files are stored unencrypted");
  }
  if (!f.Raw("user_metadata").is_null())
    BadField("user_metadata", "is not kept on checkpoints by Burst; save without it");
  f.String("type", type);
  f.RejectUnknown();
  const LoopRunInfo run = RunOf(ctx, key, model_id);
  std::string name;
  if (path.is_string()) {
    name = CheckCheckpointName(path.get<std::string>(), "path");
  } else if (sampler && sampling_seq.is_number_integer()) {
    name = "ephemeral-" + std::to_string(sampling_seq.get<int64_t>());
  } else {
    BadField("path", "is required (a checkpoint name such as \"step-100\")");
  }
  if (!ttl.is_null() &&
      !(ttl.is_number_integer() && ttl.get<int64_t>() > 0 && ttl.get<int64_t>() <= kMaxCheckpointTtlS)) {
    BadField("ttl_seconds", "must be a positive number of seconds, at most 100 years");
  }
  const std::string kind = state ? "weights" : sampler ? "sampler_weights" : "external_weights";
  if (Status quota = ctx.CheckStorage(key.org_id, 0, "path"); !quota.ok()) throw Error(quota);
  const std::string prefix = LoopCheckpointPrefix(LoopPrefix(key.org_id, model_id), kind, name);
  if (!overwrite && !name.starts_with("ephemeral-") && ctx.store.Stat(prefix + "manifest.json").ok()) {
    // 400, not 409: the SDK retries a 409 for minutes.
    BadField("path", "checkpoint " + kind + "/" + name + " of " + model_id + " exists" +
                         (state ? "; pick another name or pass overwrite" : "; pick another name"));
  }
  Json op = {{"name", name},
             {"kind", kind},
             {"prefix", prefix},
             {"path", "tinker://" + model_id + "/" + kind + "/" + name}};
  if (sampling_seq.is_number_integer()) op["sampling_session_seq_id"] = sampling_seq;
  auto fut = ctx.loops->Submit(key.org_id, model_id, seq_id, type, std::move(op));
  if (fut.ok()) {
    // Counted from now: the save runs within moments, and a checkpoint never
    // outlives its TTL. A save without one clears what an earlier save of
    // the name (or one that failed) left.
    const std::string ttl_key = LoopTtlKey(key.org_id, model_id, kind, name);
    Status s = ttl.is_number_integer()
                   ? ctx.store.Put(ttl_key, Json{{"expires_at", ctx.NowS() + ttl.get<int64_t>()}}.dump())
                   : ctx.store.Delete(ttl_key);
    if (!s.ok() && s.code() != Code::kNotFound) throw Error(s);
  }
  Answer(res, std::move(fut));
}

void LoadWeights(ApiContext& ctx, const ApiKey& key, const Json& body, http::Response& res) {
  FieldReader f(body, "");
  const std::string model_id = CanonicalRunId(f.String("model_id", ""));
  const int64_t seq_id = f.Int("seq_id", 0);
  const std::string path = f.String("path", "");
  const bool optimizer = f.Bool("optimizer", false);
  // Create-via-load (SDK 0.29 and later): a new run whose first request is this load.
  const std::string session_id = f.String("session_id", "");
  const Json model_seq = f.Raw("model_seq_id");
  const std::string base_model = f.String("base_model", "");
  f.Raw("user_metadata");
  const Json optimizer_config = f.Raw("optimizer_config");
  if (!f.Raw("weights_access_token").is_null())
    BadField("weights_access_token", "is not supported: a run loads its own organisation's checkpoints");
  f.String("type", "load_weights");
  f.RejectUnknown();
  const TinkerPath p = ParseTinkerPath(path, "path");
  if (p.kind != "weights")
    BadField("path",
             "names " + p.kind + "; load_weights takes a save_state checkpoint (tinker://RUN/weights/NAME)");
  const LoopRunInfo source = RunOf(ctx, key, p.run);  // the organisation's own run
  Json op = {{"prefix", LoopCheckpointPrefix(LoopPrefix(key.org_id, p.run), p.kind, p.name)},
             {"optimizer", optimizer},
             {"path", path}};
  if (session_id.empty()) {
    for (const char* k : {"model_seq_id", "base_model", "optimizer_config"}) {
      if (!body.value(k, Json()).is_null()) BadField(k, "goes with session_id (a run this load makes)");
    }
    RunOf(ctx, key, model_id);
    return Answer(res, ctx.loops->Submit(key.org_id, model_id, seq_id, "load_weights", std::move(op)));
  }
  if (!model_id.empty()) BadField("model_id", "and session_id are exclusive: load into a run, or make one");
  if (!model_seq.is_number_integer()) BadField("model_seq_id", "is required with session_id");
  if (optimizer && !optimizer_config.is_null())
    BadField("optimizer_config", "cannot replace the optimizer whose state the checkpoint restores");
  CheckOptimizerConfig(optimizer_config);
  if (!base_model.empty() && base_model != source.base_model_name) {
    BadField("base_model", "must be the checkpoint's base model (" + source.base_model_name + "), not \"" +
                               ToValidUtf8(base_model.substr(0, 128)) + "\"");
  }
  // The run the checkpoint came from says what it is: its base model and LoRA.
  LoopRunInfo run;
  run.org_id = key.org_id;
  run.session_id = session_id;
  run.base_model = source.base_model;
  run.base_model_name = source.base_model_name;
  run.base_model_store = source.base_model_store;
  run.lora = source.lora;
  run.scope = source.scope;
  run.vocab_size = source.vocab_size;
  run.max_seq_len = source.max_seq_len;
  if (Status s = ctx.loops->Heartbeat(key.org_id, session_id); !s.ok()) throw Error(s);
  Answer(res, ctx.loops->CreateRunByLoad(run, model_seq.get<int64_t>(), std::move(op)));
}

// A sampling session on a sampler checkpoint or a base model.
void CreateSamplingSession(ApiContext& ctx, const ApiKey& key, const Json& body, http::Response& res) {
  FieldReader f(body, "");
  const std::string session_id = f.String("session_id", "");
  const int64_t seq = f.Int("sampling_session_seq_id", 0);
  const std::string model_path = f.String("model_path", "");
  const std::string base = f.String("base_model", "");
  f.String("type", "create_sampling_session");
  f.RejectUnknown();
  if (Status s = ctx.loops->Heartbeat(key.org_id, session_id); !s.ok()) throw Error(s);
  Json sampler;
  if (!model_path.empty()) {
    const TinkerPath p = ParseTinkerPath(model_path, "model_path");
    if (p.kind != "sampler_weights")
      BadField("model_path", "must name sampler weights (tinker://RUN/sampler_weights/NAME)");
    const LoopRunInfo run = RunOf(ctx, key, p.run);
    sampler = {{"base_model", run.base_model_name},
               {"model_path", model_path},
               {"run", run.id},
               {"checkpoint_prefix", LoopCheckpointPrefix(LoopPrefix(key.org_id, run.id), p.kind, p.name)}};
  } else if (!base.empty()) {
    ResolveBaseModel(base, ctx.opt.model_roots);
    sampler = {{"base_model", base}, {"model_path", nullptr}, {"run", ""}, {"checkpoint_prefix", ""}};
  } else {
    BadField("model_path", "or base_model is required");
  }
  auto id = ctx.loops->CreateSampler(key.org_id, session_id, seq, sampler);
  if (!id.ok()) return SendStatus(res, id.status());
  SendJson(res, 200, {{"sampling_session_id", id.value()}, {"type", "create_sampling_session"}});
}

void ASample(ApiContext& ctx, const ApiKey& key, const Json& body, http::Response& res) {
  SampleOp s = ParseSampleOp(body);
  Json sampler;
  if (!s.sampling_session_id.empty()) {
    auto got = ctx.loops->Sampler(key.org_id, s.sampling_session_id);
    if (!got.ok()) throw Error(got.status());
    sampler = got.value();
  } else if (!s.model_path.empty()) {
    const TinkerPath p = ParseTinkerPath(s.model_path, "model_path");
    const LoopRunInfo run = RunOf(ctx, key, p.run);
    sampler = {{"base_model", run.base_model_name},
               {"run", run.id},
               {"checkpoint_prefix", LoopCheckpointPrefix(LoopPrefix(key.org_id, run.id), p.kind, p.name)}};
  } else {
    sampler = {{"base_model", s.base_model}, {"run", ""}, {"checkpoint_prefix", ""}};
  }
  const std::string base_name = sampler.value("base_model", "");
  const std::string dir = ResolveBaseModel(base_name, ctx.opt.model_roots);
  const ModelInfo m = CatalogEntryFor(dir, ctx.opt.model_roots, base_name);
  LoopDataLimits limits{VocabSize(dir), m.max_seq_len, 0};
  std::vector<int64_t> prompt = ParseModelInput(s.prompt, limits, "prompt");
  if (prompt.empty()) BadField("prompt", "has no tokens");
  if (m.max_seq_len > 0 && static_cast<int64_t>(prompt.size()) + s.max_tokens > m.max_seq_len) {
    BadField("sampling_params.max_tokens", "the prompt's " + std::to_string(prompt.size()) +
                                               " tokens plus max_tokens " + std::to_string(s.max_tokens) +
                                               " exceed the model's max_seq_len of " +
                                               std::to_string(m.max_seq_len));
  }
  Json op = s.op;
  op["prompt"] = prompt;
  op["checkpoint_prefix"] = sampler.value("checkpoint_prefix", "");
  op["base_model_name"] = base_name;
  const BillingScope scope = ChooseScope(std::nullopt, m, "lora").scope;
  auto f = ctx.loops->Sample(key.org_id, dir, ctx.ShippedModel(dir), scope, sampler.value("run", ""), op);
  if (!f.ok()) return SendStatus(res, f.status());
  // SDK 0.26 and later: one id per sample, fixed when the request is taken
  // (the SDK stamps them on the sequences of the answer).
  Json ids = Json::array();
  for (int64_t i = 0; i < op.value("num_samples", int64_t{1}); ++i)
    ids.push_back(f.value()->id + "-" + std::to_string(i));
  SendJson(res, 200, {{"request_id", f.value()->id}, {"sample_sequence_ids", ids}});
}

// A finished request's answer, as the SDK reads it.
void SendDone(ApiContext& ctx, const ApiKey& key, const http::Request& req,
              const std::shared_ptr<LoopFuture>& fut, http::Response& res) {
  ctx.loops->Fetched(fut);
  if (!fut->error.ok()) return SendJson(res, 200, FailedFutureJson(fut->error));
  Json result = fut->result;
  if (fut->type == "save_weights_for_sampler" && fut->meta.contains("sampling_session_seq_id")) {
    // save_weights_and_get_sampling_client: the sampler comes with the weights.
    const LoopRunInfo run = RunOf(ctx, key, fut->run);
    auto sampler = ctx.loops->CreateSampler(key.org_id, run.session_id,
                                            fut->meta["sampling_session_seq_id"].get<int64_t>(),
                                            {{"base_model", run.base_model_name},
                                             {"model_path", fut->meta["path"]},
                                             {"run", run.id},
                                             {"checkpoint_prefix", fut->meta["prefix"]}});
    if (!sampler.ok()) return SendStatus(res, sampler.status());
    result = {
        {"sampling_session_id", sampler.value()}, {"path", nullptr}, {"type", "save_weights_for_sampler"}};
  }
  const bool proto = req.header("accept").find("application/x-protobuf") != std::string::npos;
  // Burst's own (JSON answers only; the SDK ignores fields it does not know):
  // where and how long it ran, so a client can tell compute from overhead.
  Json timing = {{"worker", fut->worker},
                 {"cold_start", fut->cold},
                 {"compute_ms", fut->compute_ms},
                 {"request_to_result_ms", fut->finished_ms - fut->created_ms}};
  if (fut->batch_peak > 0) timing["batch_peak"] = fut->batch_peak;
  SendFutureResult(res, fut->type, result, proto, timing);
}

// The long poll: a request not done yet is parked (no thread waits for it)
// until it is, or for kLongPollMs, then answered "try_again".
void RetrieveFuture(ApiContext& ctx, const ApiKey& key, const http::Request& req, const Json& body,
                    http::Response& res) {
  FieldReader f(body, "");
  const std::string id = f.String("request_id", "");
  f.Bool("allow_metadata_only", false);
  f.String("model_id", "");
  f.RejectUnknown();
  auto waker = std::make_shared<Waker>();
  auto got = ctx.loops->Watch(key.org_id, id, waker);
  if (!got.ok()) return SendStatus(res, got.status());
  const std::shared_ptr<LoopFuture> fut = got.value();
  if (ctx.loops->IsDone(fut)) return SendDone(ctx, key, req, fut, res);
  ApiContext* c = &ctx;
  res.park = std::make_shared<http::Park>();
  res.park->waker = waker;
  res.park->wait_ms = kLongPollMs;
  res.park->resume = [c, key, fut, id](const http::Request& q, http::Response& r, bool) {
    Status s = Try([&] {
      if (c->loops->IsDone(fut)) return SendDone(*c, key, q, fut, r);
      SendJson(r, 200, {{"type", "try_again"}, {"request_id", id}, {"queue_state", "active"}});
    });
    if (!s.ok()) {
      r = http::Response();
      SendStatus(r, s);
    }
  };
}

}  // namespace

void AddTinkerRoutes(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  auto json = [c](void (*fn)(ApiContext&, const ApiKey&, const Json&, http::Response&)) {
    return [c, fn](const ApiKey& k, const http::Request& q, http::Response& r) {
      auto body = ReadBody(q, r);
      if (!body) return;
      fn(*c, k, *body, r);
    };
  };
  routes.Post("/api/v1/client/config",
              [](const ApiKey&, const auto&, auto& r) { SendJson(r, 200, ClientConfigJson()); });
  routes.Post("/api/v1/client/dynamic_config", [](const ApiKey&, const auto&, auto& r) {
    SendJson(r, 200, {{"refresh_interval_sec", 300}});
  });
  routes.Post(
      "/api/v1/telemetry",
      [](const ApiKey&, const auto&, auto& r) {
        SendJson(r, 200, {{"status", "accepted"}});
      },
      kMaxJsonBody);
  routes.Get("/api/v1/healthz", [](const ApiKey&, const auto&, auto& r) {
    SendJson(r, 200, {{"status", "ok"}});
  });
  routes.Post("/api/v1/create_session",
              json([](ApiContext& ctx, const ApiKey& k, const Json& b, http::Response& r) {
                FieldReader f(b, "");
                const Json tags = f.Raw("tags"), meta = f.Raw("user_metadata");
                f.String("sdk_version", "");
                f.String("project_id", "");
                f.String("type", "create_session");
                f.RejectUnknown();
                auto id = ctx.loops->CreateSession(k.org_id, tags, meta);
                if (!id.ok()) return SendStatus(r, id.status());
                SendJson(r, 200, {{"session_id", id.value()}, {"type", "create_session"}});
              }));
  // ServiceClient.close(status, detail) (SDK 0.26 and later).
  routes.Post("/api/v1/sessions/{}/finish", [c](const ApiKey& k, const http::Request& q, http::Response& r) {
    try {
      const Json b = ParseJson(q.body, "body");
      if (!b.is_object()) BadField("body", "must be a JSON object");
      FieldReader f(b, "");
      const Json reason = f.Raw("reason");
      const Json detail = f.Raw("detail");
      f.RejectUnknown();
      if (!detail.is_null() && (!detail.is_string() || detail.get<std::string>().size() > 4096))
        BadField("detail", "must be a string of at most 4096 bytes, or null");
      if (!reason.is_object())
        BadField("reason", "must be {\"type\": \"success\"|\"errored\"|\"interrupted\"}");
      FieldReader rf(reason, "reason");
      const std::string type = rf.String("type", "");
      rf.RejectUnknown();
      if (type != "success" && type != "errored" && type != "interrupted")
        BadField("reason.type", "must be success, errored or interrupted");
      if (Status s = c->loops->FinishSession(k.org_id, q.matches.at(1), type); !s.ok())
        return SendStatus(r, s);
      SendJson(r, 200, Json::object());
    } catch (const Error& e) {
      SendStatus(r, e.status());
    }
  });
  routes.Post("/api/v1/session_heartbeat",
              json([](ApiContext& ctx, const ApiKey& k, const Json& b, http::Response& r) {
                FieldReader f(b, "");
                const std::string id = f.String("session_id", "");
                f.String("type", "session_heartbeat");
                f.RejectUnknown();
                if (Status s = ctx.loops->Heartbeat(k.org_id, id); !s.ok()) return SendStatus(r, s);
                SendJson(r, 200, {{"type", "session_heartbeat"}});
              }));
  routes.Get("/api/v1/get_server_capabilities", [c](const ApiKey&, const auto&, auto& r) {
    Json models = Json::array();
    for (const ModelInfo& m : LoadCatalog(c->opt.model_roots)) {
      if (m.error.empty()) models.push_back({{"model_name", m.id}, {"max_context_length", m.max_seq_len}});
    }
    SendJson(r, 200, {{"supported_models", models}});
  });
  routes.Post("/api/v1/get_info",
              json([](ApiContext& ctx, const ApiKey& k, const Json& b, http::Response& r) {
                FieldReader f(b, "");
                const std::string id = CanonicalRunId(f.String("model_id", ""));
                f.String("type", "get_info");
                f.RejectUnknown();
                const LoopRunInfo run = RunOf(ctx, k, id);
                SendJson(r, 200,
                         {{"model_id", run.id},
                          {"model_data",
                           {{"arch", "llama"},
                            {"model_name", run.base_model_name},
                            {"tokenizer_id", run.base_model_name}}},
                          {"is_lora", true},
                          {"lora_rank", run.lora.value("rank", int64_t{0})},
                          {"model_name", run.base_model_name},
                          {"type", "get_info"}});
              }));
  routes.Post("/api/v1/create_model", json(CreateModel));
  routes.Post(
      "/api/v1/forward_backward",
      [c](const ApiKey& k, const http::Request& q, http::Response& r) {
        ForwardBackward(*c, k, q, r, false);
      },
      kMaxBatchBody);
  routes.Post(
      "/api/v1/forward",
      [c](const ApiKey& k, const http::Request& q, http::Response& r) { ForwardBackward(*c, k, q, r, true); },
      kMaxBatchBody);
  routes.Post("/api/v1/optim_step", json(OptimStep));
  for (const char* type : {"save_weights", "save_weights_for_sampler", "save_weights_external"}) {
    routes.Post(std::string("/api/v1/") + type,
                [c, type](const ApiKey& k, const http::Request& q, http::Response& r) {
                  auto body = ReadBody(q, r);
                  if (!body) return;
                  SaveWeights(*c, k, *body, r, type);
                });
  }
  routes.Post("/api/v1/load_weights", json(LoadWeights));
  routes.Post("/api/v1/create_sampling_session", json(CreateSamplingSession));
  routes.Post("/api/v1/asample", json(ASample));
  routes.Post("/api/v1/retrieve_future", [c](const ApiKey& k, const http::Request& q, http::Response& r) {
    auto body = ReadBody(q, r);
    if (!body) return;
    RetrieveFuture(*c, k, q, *body, r);
  });
  routes.Get("/api/v1/samplers/{}", [c](const ApiKey& k, const http::Request& q, http::Response& r) {
    auto s = c->loops->Sampler(k.org_id, q.matches.at(1));
    if (!s.ok()) return SendStatus(r, s.status());
    SendJson(r, 200,
             {{"sampler_id", q.matches.at(1)},
              {"base_model", s.value().value("base_model", "")},
              {"model_path", s.value().value("model_path", Json())}});
  });
}

}  // namespace burst
