#include "api/tinker_wire.h"

#include "api/job_request.h"
#include "api/respond.h"
#include "api/tinker_proto.h"
#include "core/fs.h"
#include "core/utf8.h"
#include "train/loop_data.h"

namespace burst {

Json ClientConfigJson() {
  // The SDK's defaults, except what this server wants: forward_backward
  // chunks sent in order (parallel_fwdbwd_chunks needs nothing more from
  // Burst, but one at a time keeps a run's queue short), and plain httpx.
  return {{"pjwt_auth_enabled", false},
          {"use_pyqwest_transport", false},
          {"proto_compress_fwdbwd", false},
          {"parallel_fwdbwd_chunks", false},
          {"create_model_via_load_weights", false}};
}

std::string ResolveBaseModel(const std::string& name, const std::vector<std::filesystem::path>& roots) {
  const Json models = ListModels(roots);
  if (models.contains(name)) return models[name].get<std::string>();
  std::string known;
  for (const auto& [n, _] : models.items()) known += (known.empty() ? "" : ", ") + n;
  throw Error(Code::kNotFound, "base_model: no model \"" + name + "\" (models: " + known + ")", "base_model");
}

int64_t VocabSize(const std::string& dir) {
  const std::filesystem::path p = std::filesystem::path(dir) / "config.json";
  const Json c = ParseJson(ReadFile(p), p.string());
  return c.value("vocab_size", int64_t{0});
}

Json ParseLoraConfig(const Json& lora, const ModelInfo& m, int64_t default_seed) {
  if (!lora.is_object()) BadField("lora_config", "is required: {\"rank\": R}");
  FieldReader f(lora, "lora_config");
  const int64_t rank = f.Int("rank", 32);
  Json seed = f.Raw("seed");
  const bool attn = f.Bool("train_attn", true), mlp = f.Bool("train_mlp", true),
             unembed = f.Bool("train_unembed", true);
  f.RejectUnknown();
  if (std::find(m.lora_ranks.begin(), m.lora_ranks.end(), rank) == m.lora_ranks.end()) {
    std::string allowed;
    for (int64_t r : m.lora_ranks) allowed += (allowed.empty() ? "" : ", ") + std::to_string(r);
    BadField("lora_config.rank",
             std::to_string(rank) + " is not allowed on " + m.id + "; allowed: " + allowed);
  }
  if (!attn && !mlp && !unembed)
    BadField("lora_config", "trains nothing: set train_attn, train_mlp or train_unembed");
  if (seed.is_null()) {
    seed = default_seed;
  } else if (!seed.is_number_integer() || seed.get<int64_t>() < 0) {
    BadField("lora_config.seed", "must be a non-negative integer");
  }
  return {
      {"rank", rank}, {"seed", seed}, {"train_attn", attn}, {"train_mlp", mlp}, {"train_unembed", unembed}};
}

Json ParseAdamParams(const Json& adam) {
  Json out = {{"learning_rate", 1e-4}, {"beta1", 0.9},        {"beta2", 0.95},
              {"eps", 1e-12},          {"weight_decay", 0.0}, {"grad_clip_norm", 0.0}};
  if (adam.is_null()) return out;
  if (!adam.is_object()) BadField("adam_params", "must be an object");
  FieldReader f(adam, "adam_params");
  for (auto& [k, v] : out.items()) v = f.Number(k, v.get<double>());
  f.RejectUnknown();
  auto need = [&](const char* k, bool ok, const char* what) {
    if (!ok) BadField(std::string("adam_params.") + k, what);
  };
  need("learning_rate", out["learning_rate"].get<double>() >= 0, "must be >= 0");
  need("beta1", out["beta1"].get<double>() >= 0 && out["beta1"].get<double>() < 1, "must be in [0, 1)");
  need("beta2", out["beta2"].get<double>() >= 0 && out["beta2"].get<double>() < 1, "must be in [0, 1)");
  need("eps", out["eps"].get<double>() >= 0, "must be >= 0");
  need("weight_decay", out["weight_decay"].get<double>() >= 0, "must be >= 0");
  need("grad_clip_norm", out["grad_clip_norm"].get<double>() >= 0, "must be >= 0 (0 = no clipping)");
  return out;
}

void CheckOptimizerConfig(const Json& config) {
  if (config.is_null()) return;
  if (!config.is_object()) BadField("optimizer_config", "must be an object: {\"type\": \"adamw\"}");
  FieldReader f(config, "optimizer_config");
  const std::string type = f.String("type", "adamw");
  if (type != "adamw") {
    BadField("optimizer_config.type", "Burst trains with AdamW only (\"adamw\"); \"" +
                                          ToValidUtf8(type.substr(0, 64)) + "\" is not available");
  }
  f.RejectUnknown();
}

void RefuseOptimizerParams(const Json& params) {
  if (params.is_null()) return;
  const std::string type = params.is_object() ? params.value("type", std::string()) : std::string();
  BadField("optimizer_params", "Burst trains with AdamW only (send adam_params); optimizer \"" +
                                   ToValidUtf8(type.substr(0, 64)) + "\" is not available");
}

std::string CheckCheckpointName(const std::string& name, const std::string& param) {
  bool ok = !name.empty() && name.size() <= 128 && name != "." && name != "..";
  for (char c : name) {
    ok &= std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '=';
  }
  if (!ok)
    BadField(param, "\"" + ToValidUtf8(name.substr(0, 64)) +
                        "\" is not a checkpoint name: 1-128 of letters, digits, '.', '_', '-', '='");
  return name;
}

std::string CanonicalRunId(const std::string& model_id) {
  const size_t at = model_id.rfind(":train:");
  if (at == std::string::npos) return model_id;
  return model_id.substr(0, at) + "-train-" + model_id.substr(at + 7);
}

TinkerPath ParseTinkerPath(const std::string& path, const std::string& param) {
  const std::string scheme = "tinker://";
  if (path.rfind(scheme, 0) != 0)
    BadField(param,
             "must be a tinker://RUN/KIND/NAME path (KIND: weights, sampler_weights or external_weights)");
  const std::string rest = path.substr(scheme.size());
  const size_t a = rest.find('/'), b = a == std::string::npos ? a : rest.find('/', a + 1);
  if (a == std::string::npos || b == std::string::npos || rest.find('/', b + 1) != std::string::npos) {
    BadField(param, "must be tinker://RUN/KIND/NAME (three parts)");
  }
  TinkerPath p{CanonicalRunId(rest.substr(0, a)), rest.substr(a + 1, b - a - 1), rest.substr(b + 1)};
  if (p.kind != "weights" && p.kind != "sampler_weights" && p.kind != "external_weights")
    BadField(param, "kind must be weights, sampler_weights or external_weights");
  CheckCheckpointName(p.name, param);
  return p;
}

FwdBwdRequest ParseFwdBwdRequest(const http::Request& req, bool forward_route) {
  FwdBwdRequest r;
  if (req.header("content-type").find("application/x-protobuf") != std::string::npos) {
    // What SDK 0.25.0 sends (forward too, with forward_only).
    if (!req.header("content-encoding").empty()) {
      BadField("content-encoding",
               "compressed bodies are not accepted (client/config says proto_compress_fwdbwd: false)");
    }
    ProtoFwdBwd p = DecodeFwdBwdRequest(req.body, kMaxRequestValues);
    r.model_id = CanonicalRunId(p.model_id);
    r.seq_id = p.seq_id;
    r.loss_fn = p.loss_fn;
    r.loss_fn_config = std::move(p.loss_fn_config);
    r.data = std::move(p.data);
    r.forward_only = p.forward_only || forward_route;
    r.data_path = "data";
    r.config_path = "loss_fn_config";
    if (r.loss_fn.empty()) BadField("loss_fn", "is required");
    return r;
  }
  // The data is moved out of the parsed body, never copied: a batch's tree
  // is the bulk of the request's memory.
  Json body = ParseJson(req.body, "body");
  if (!body.is_object()) BadField("body", "must be a JSON object");
  FieldReader f(body, "");
  const char* input = forward_route ? "forward_input" : "forward_backward_input";
  r.model_id = CanonicalRunId(f.String("model_id", ""));
  r.seq_id = f.Int("seq_id", 0);
  f.Allow(input);
  f.String("type", "");
  f.RejectUnknown();
  if (!body.contains(input) || !body[input].is_object())
    BadField(input, "is required: {data, loss_fn, loss_fn_config}");
  Json& in = body[input];
  FieldReader i(in, input);
  i.Allow("data");
  r.loss_fn = i.String("loss_fn", "");
  r.loss_fn_config = i.Raw("loss_fn_config");
  i.RejectUnknown();
  if (in.contains("data")) r.data = std::move(in["data"]);
  r.forward_only = forward_route;
  r.data_path = std::string(input) + ".data";
  r.config_path = std::string(input) + ".loss_fn_config";
  if (r.loss_fn.empty()) BadField(std::string(input) + ".loss_fn", "is required");
  return r;
}

SampleOp ParseSampleOp(const Json& body) {
  SampleOp s;
  FieldReader f(body, "");
  const int64_t n = f.Int("num_samples", 1);
  s.prompt = f.Raw("prompt");
  const Json params = f.Raw("sampling_params");
  s.sampling_session_id = f.String("sampling_session_id", "");
  s.model_path = f.String("model_path", "");
  s.base_model = f.String("base_model", "");
  f.Int("seq_id", 0);
  const bool prompt_logprobs = f.Bool("prompt_logprobs", false);
  const int64_t topk = f.Int("topk_prompt_logprobs", 0);
  // Newer SDKs' options, each sent at its "off" value unless asked for: on,
  // they are refused by name (not yet in Burst).
  for (const char* k : {"topk_sample_logprobs", "prompt_alt_tokens_k"}) {
    if (f.Int(k, 0) != 0) BadField(k, "is not available in Burst yet (send 0)");
  }
  for (const char* k : {"target_prompt_logprobs", "prompt_logprobs_last_n"}) {
    if (!f.Raw(k).is_null()) BadField(k, "is not available in Burst yet (leave it out)");
  }
  if (f.Bool("record_stability_info", false))
    BadField("record_stability_info", "is not available in Burst yet (StableReinforce's stability records)");
  f.String("type", "sample");
  f.RejectUnknown();
  if (n < 1 || n > 64) BadField("num_samples", "must be between 1 and 64");
  if (topk < 0 || topk > 20) BadField("topk_prompt_logprobs", "must be between 0 and 20");
  if (s.sampling_session_id.empty() && s.model_path.empty() && s.base_model.empty()) {
    BadField("sampling_session_id", "or model_path or base_model is required");
  }
  Json p = params.is_null() ? Json::object() : params;
  if (!p.is_object()) BadField("sampling_params", "must be an object");
  FieldReader sp(p, "sampling_params");
  Json op = {{"num_samples", n}, {"prompt_logprobs", prompt_logprobs}, {"topk_prompt_logprobs", topk}};
  s.max_tokens = sp.Int("max_tokens", 16);
  if (s.max_tokens < 0 || s.max_tokens > 4096)
    BadField("sampling_params.max_tokens", "must be between 0 and 4096");
  op["max_tokens"] = s.max_tokens;
  op["temperature"] = sp.Number("temperature", 1.0);
  op["top_k"] = sp.Int("top_k", -1);
  op["top_p"] = sp.Number("top_p", 1.0);
  const Json seed = sp.Raw("seed");
  if (!seed.is_null() && !seed.is_number_unsigned() &&
      !(seed.is_number_integer() && seed.get<int64_t>() >= 0)) {
    BadField("sampling_params.seed", "must be a non-negative integer");
  }
  op["seed"] = seed;
  const Json stop = sp.Raw("stop");
  sp.RejectUnknown();
  if (!(op["temperature"].get<double>() >= 0)) BadField("sampling_params.temperature", "must be >= 0");
  const double top_p = op["top_p"].get<double>();
  if (!(top_p > 0 && top_p <= 1)) BadField("sampling_params.top_p", "must be in (0, 1]");
  // stop: a string, a list of strings, or a list of token ids.
  Json strs = Json::array(), ids = Json::array();
  if (stop.is_string()) {
    strs.push_back(stop);
  } else if (stop.is_array()) {
    if (stop.size() > 16) BadField("sampling_params.stop", "holds more than 16 entries");
    for (const Json& e : stop) {
      if (e.is_string())
        strs.push_back(e);
      else if (e.is_number_integer())
        ids.push_back(e);
      else
        BadField("sampling_params.stop", "must be a string, a list of strings or a list of token ids");
    }
  } else if (!stop.is_null()) {
    BadField("sampling_params.stop", "must be a string, a list of strings or a list of token ids");
  }
  op["stop"] = strs;
  op["stop_token_ids"] = ids;
  s.op = std::move(op);
  return s;
}

Json FailedFutureJson(const Status& s) {
  const Code c = s.code();
  const bool user = c == Code::kInvalidArgument || c == Code::kNotFound || c == Code::kFailedPrecondition ||
                    c == Code::kAlreadyExists || c == Code::kUnimplemented || c == Code::kDataLoss;
  return {{"error", RedactPaths(s.message())}, {"category", user ? "user" : "server"}};
}

namespace {

Json ForwardBackwardJson(const Json& result) {
  Json outputs = Json::array();
  for (const Json& o : result.value("loss_fn_outputs", Json::array())) {
    Json d = Json::object();
    for (const auto& [name, values] : o.items()) d[name] = TensorDataJson(values.get<std::vector<float>>());
    outputs.push_back(d);
  }
  return {{"loss_fn_output_type", "ArrayRecord"},
          {"loss_fn_outputs", outputs},
          {"metrics", result.value("metrics", Json::object())}};
}

Json SampleJson(const Json& result) {
  Json seqs = Json::array();
  for (const Json& s : result.value("sequences", Json::array())) {
    seqs.push_back({{"stop_reason", s.value("stop_reason", "length")},
                    {"tokens", s.value("tokens", Json::array())},
                    {"logprobs", s.value("logprobs", Json())}});
  }
  return {{"sequences", seqs},
          {"type", "sample"},
          {"prompt_logprobs", result.value("prompt_logprobs", Json())},
          {"topk_prompt_logprobs", result.value("topk_prompt_logprobs", Json())},
          {"prompt_cache_hit_tokens", 0}};
}

}  // namespace

void SendFutureResult(http::Response& res, const std::string& type, const Json& result, bool proto,
                      const Json& burst) {
  const bool fwd = type == "forward_backward" || type == "forward";
  if (proto && (fwd || type == "sample")) {
    res.status = 200;
    res.set_content(fwd ? EncodeFwdBwdOutput(result) : EncodeSampleResponse(result),
                    "application/x-protobuf");
    return;
  }
  Json out = fwd ? ForwardBackwardJson(result) : type == "sample" ? SampleJson(result) : result;
  if (!burst.is_null() && out.is_object()) out["burst"] = burst;
  SendJson(res, 200, out);
}

}  // namespace burst
