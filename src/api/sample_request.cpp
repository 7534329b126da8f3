#include "api/sample_request.h"

#include <cmath>

#include "api/job_request.h"
#include "api/models.h"
#include "api/tinker_wire.h"
#include "core/ids.h"
#include "core/sample_limits.h"
#include "core/utf8.h"
#include "store/keys.h"
#include "store/object_store.h"
#include "train/chat_template.h"

namespace burst {
namespace fs = std::filesystem;
namespace {

// An OpenAI field Burst accepts only with its no-op value.
void NoOp(FieldReader& f, const std::string& key, const Json& allowed) {
  Json v = f.Raw(key);
  if (v.is_null() || v == allowed) return;
  if (allowed.is_object() && v.is_object() && v.empty()) return;
  throw Error(Code::kInvalidArgument, key + ": not supported by Burst (only " + allowed.dump() + ")", key);
}

// A message's content: a string, or OpenAI's list of content parts, of which
// Burst's models read text parts ({"type": "text", "text": ...}), joined
// with newlines as OpenAI-compatible servers join them. Other parts (images,
// audio, files) are a 400 naming the part.
std::string MessageText(const Json& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array() || content.empty())
    BadField(at, "must be a string or a non-empty list of text parts");
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string part = at + "[" + std::to_string(j) + "]";
    if (!content[j].is_object()) BadField(part, "must be {\"type\": \"text\", \"text\": ...}");
    FieldReader p(content[j], part);
    const std::string type = p.String("type", "");
    if (type != "text") {
      BadField(part + ".type", "Burst's models read text only: \"" + type + "\" parts are not supported");
    }
    if (j > 0) text += "\n";
    text += p.String("text", "");
    p.RejectUnknown();
  }
  return text;
}

// OpenAI fields for what Burst does not do yet (tools, structured output):
// a 400 that says so, rather than an unknown-field error or silence. Their
// off values pass.
void NotYet(FieldReader& f, bool chat) {
  Json tools = f.Raw("tools");
  if (!tools.is_null() && !(tools.is_array() && tools.empty())) {
    BadField("tools", "Burst's models do not call tools yet; send the request without tools");
  }
  Json choice = f.Raw("tool_choice");
  if (!choice.is_null() && choice != "none" && choice != "auto") {
    BadField("tool_choice", "Burst's models do not call tools yet (only \"none\" or \"auto\")");
  }
  f.Raw("parallel_tool_calls");  // meaningless without tools
  Json format = f.Raw("response_format");
  if (!format.is_null()) {
    if (!format.is_object() || format.value("type", "") != "text") {
      BadField("response_format", "Burst returns plain text only (only {\"type\": \"text\"})");
    }
  }
  if (chat) {
    Json modalities = f.Raw("modalities");
    if (!modalities.is_null() && modalities != Json::array({"text"})) {
      BadField("modalities", "Burst's models produce text only (only [\"text\"])");
    }
  }
}

}  // namespace

Json ParseSampleRequest(const Json& body, bool chat) {
  if (!body.is_object()) BadField("body", "must be a JSON object");
  FieldReader f(body, "");
  Json out;
  out["model"] = f.String("model", "");
  if (out["model"].get<std::string>().empty())
    BadField("model", "required: a checkpoint (JOB:step-N or ftckpt-...) or a model name");
  if (chat) {
    Json msgs = f.Raw("messages");
    if (!msgs.is_array() || msgs.empty())
      BadField("messages", "required: a non-empty list of {role, content}");
    Json clean = Json::array();
    for (size_t i = 0; i < msgs.size(); ++i) {
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (!msgs[i].is_object()) BadField(at, "must be an object");
      FieldReader m(msgs[i], at);
      std::string role = m.String("role", "");
      if (role == "developer") role = "system";  // OpenAI's newer name for system instructions
      if (role != "system" && role != "user" && role != "assistant") {
        BadField(at + ".role", "must be system, developer, user or assistant (got \"" + role + "\")");
      }
      const std::string content = MessageText(m.Raw("content"), at + ".content");
      m.Raw("name");
      m.RejectUnknown();
      clean.push_back({{"role", role}, {"content", content}});
    }
    out["messages"] = clean;
    // Variables for the model's own chat_template, as vLLM takes them
    // ({"enable_thinking": false} for Qwen 3).
    if (Json kw = f.Raw("chat_template_kwargs"); !kw.is_null()) {
      CheckTemplateKwargs(kw, "chat_template_kwargs");
      if (!kw.empty()) out["chat_template_kwargs"] = std::move(kw);
    }
  } else {
    // A string, or token ids (lm-evaluation-harness sends those), or either
    // in a list of one: one prompt per request.
    Json prompt = f.Raw("prompt");
    if (prompt.is_array() && prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) {
      prompt = Json(prompt[0]);
    }
    if (prompt.is_array() && !prompt.empty() && (prompt[0].is_string() || prompt[0].is_array())) {
      BadField("prompt", "one prompt per request: send each of the " + std::to_string(prompt.size()) +
                             " prompts in a request of its own");
    }
    if (prompt.is_string()) {
      out["prompt"] = prompt;
    } else if (prompt.is_array() && !prompt.empty() && prompt.size() <= kMaxPromptIds) {
      for (size_t i = 0; i < prompt.size(); ++i) {
        if (!prompt[i].is_number_integer() || prompt[i].get<int64_t>() < 0 ||
            prompt[i].get<int64_t>() > INT32_MAX) {
          BadField("prompt[" + std::to_string(i) + "]", "token ids must be integers >= 0");
        }
      }
      out["prompt_ids"] = prompt;
    } else {
      BadField("prompt", "required: a string or a non-empty list of at most " +
                             std::to_string(kMaxPromptIds) + " token ids (one prompt per request)");
    }
  }
  const int64_t n = f.Int("n", 1);
  if (n < 1 || n > 16) BadField("n", "must be in 1..16");
  out["n"] = n;
  double temperature = f.Number("temperature", 1.0);
  if (temperature < 0 || temperature > 2 || !std::isfinite(temperature))
    BadField("temperature", "must be in 0..2");
  out["temperature"] = temperature;
  double top_p = f.Number("top_p", 1.0);
  if (!(top_p > 0 && top_p <= 1)) BadField("top_p", "must be in (0, 1]");
  out["top_p"] = top_p;
  int64_t max_tokens = f.Int("max_tokens", chat ? 256 : 16);
  if (chat && f.Has("max_completion_tokens")) max_tokens = f.Int("max_completion_tokens", max_tokens);
  Json stop = f.Raw("stop");
  if (stop.is_string()) stop = Json::array({stop});
  if (stop.is_null()) stop = Json::array();
  if (!stop.is_array() || stop.size() > 4)
    BadField("stop", "must be a string or a list of at most 4 strings");
  for (const Json& s : stop)
    if (!s.is_string() || s.get<std::string>().empty()) BadField("stop", "must be non-empty strings");
  out["stop"] = stop;
  Json seed = f.Raw("seed");
  if (!seed.is_null() && !seed.is_number_integer()) BadField("seed", "must be an integer");
  // None given: a fresh one, so calls at temperature > 0 differ as with
  // OpenAI; the response's `burst.seed` says which, to repeat a call.
  out["seed"] = seed.is_null() ? Json(NewSeed()) : seed;
  // Logprobs: chat's `logprobs` (bool) with `top_logprobs` (alternatives per
  // token); the legacy completions' `logprobs` (the number of alternatives,
  // 0 for the sampled token's only) with `echo` (the prompt scored too).
  Json logprobs = f.Raw("logprobs");
  const std::string top_range = "0.." + std::to_string(kMaxTopLogprobs);
  int64_t top = 0;
  bool echo = false;
  if (chat) {
    if (!logprobs.is_null() && !logprobs.is_boolean()) BadField("logprobs", "must be true or false");
    out["logprobs"] = logprobs.is_boolean() && logprobs.get<bool>();
    top = f.Int("top_logprobs", 0);
    if (top < 0 || top > kMaxTopLogprobs) BadField("top_logprobs", "must be in " + top_range);
    if (top > 0 && !out["logprobs"].get<bool>()) BadField("top_logprobs", "needs \"logprobs\": true");
  } else {
    if (!logprobs.is_null()) {
      if (!logprobs.is_number_integer() || logprobs.get<int64_t>() < 0 ||
          logprobs.get<int64_t>() > kMaxTopLogprobs) {
        BadField("logprobs",
                 "must be the number of alternatives per token, " + top_range + " (null for none)");
      }
      top = logprobs.get<int64_t>();
    }
    out["logprobs"] = !logprobs.is_null();
    echo = f.Bool("echo", false);
    NoOp(f, "suffix", Json());
    NoOp(f, "best_of", 1);
  }
  if (top > 0) out["top_logprobs"] = top;
  if (echo) out["echo"] = true;
  Json stream = f.Raw("stream");
  if (!stream.is_null() && !stream.is_boolean()) BadField("stream", "must be true or false");
  out["stream"] = stream == true;
  if (echo && out["stream"].get<bool>())
    BadField("echo", "is not supported with stream: ask without one of them");
  // 0 new tokens only to score the prompt (echo with logprobs).
  const bool scoring = echo && out["logprobs"].get<bool>();
  if (max_tokens < (scoring ? 0 : 1) || max_tokens > 4096) {
    BadField("max_tokens",
             scoring ? "must be in 0..4096" : "must be in 1..4096 (0 only with echo and logprobs)");
  }
  out["max_tokens"] = max_tokens;
  // stream_options: {"include_usage": bool} (a last chunk with the usage).
  Json so = f.Raw("stream_options");
  if (!so.is_null()) {
    if (!so.is_object()) BadField("stream_options", "must be an object");
    FieldReader sf(so, "stream_options");
    if (sf.Bool("include_usage", false)) out["include_usage"] = true;
    sf.RejectUnknown();
  }
  NotYet(f, chat);
  NoOp(f, "frequency_penalty", 0);
  NoOp(f, "presence_penalty", 0);
  NoOp(f, "logit_bias", Json::object());
  f.Raw("user");  // accepted and ignored, as an end-user label
  // Burst's own: the billing scope (docs/api.md, "Models and scopes").
  const std::string scope = f.String("scope", "");
  if (AskedScope(scope)) out["scope"] = scope;  // an unknown name is a 400 naming "scope"
  f.RejectUnknown();
  return out;
}

SampleTarget ResolveSampleModel(const std::string& model, const std::string& org_id, Metadata& md,
                                const std::vector<fs::path>& model_roots, const ObjectStore* store) {
  if (model.rfind("tinker://", 0) == 0) {
    const TinkerPath p = ParseTinkerPath(model, "model");
    if (p.kind != "sampler_weights")
      BadField("model", "must name sampler weights (tinker://RUN/sampler_weights/NAME)");
    const std::string prefix = LoopCheckpointPrefix(LoopPrefix(org_id, p.run), p.kind, p.name);
    auto cfg =
        store ? store->Get(prefix + "adapter_config.json") : Result<std::string>(Status(Code::kNotFound, ""));
    if (!cfg.ok()) throw Error(Code::kNotFound, "model: no checkpoint " + model, "model");
    const Json c = ParseJson(cfg.value(), "adapter_config.json");
    const std::string base = c.value("base_model_name_or_path", "");
    const Json models = ListModels(model_roots);
    if (!models.contains(base))
      throw Error(Code::kNotFound, "model: the base model of " + model + " is gone", "model");
    return SampleTarget{models[base].get<std::string>(), prefix, false};
  }
  std::string job_id;
  int64_t step = -1;
  if (model.find(":step-") != std::string::npos || model.rfind("ftckpt-", 0) == 0) {  // JOB[:SUFFIX]:step-N
    const std::optional<CheckpointName> name = ParseCheckpointName(model);
    if (!name) {
      throw Error(Code::kInvalidArgument,
                  "model: \"" + ToValidUtf8(model) +
                      "\" is not a checkpoint name: use JOB:step-N (JOB:SUFFIX:step-N) or ftckpt-..., as GET "
                      "/v1/fine_tuning/jobs/JOB/checkpoints lists them",
                  "model");
    }
    job_id = name->job_id;
    step = name->step;
  }
  if (!job_id.empty()) {
    auto job = md.GetJob(org_id, job_id);
    auto cps = step > 0 && job.ok() ? md.ListCheckpoints(job_id, step + 1, 1)
                                    : Result<std::vector<CheckpointRecord>>(Status());
    if (!job.ok() || !cps.ok() || cps.value().empty() || cps.value()[0].step != step ||
        !SuffixMatches(*ParseCheckpointName(model), job.value().spec)) {
      throw Error(Code::kNotFound,
                  "model: no checkpoint " + model + " (see GET /v1/fine_tuning/jobs/JOB/checkpoints)",
                  "model");
    }
    SampleTarget t;
    t.base_model = job.value().spec.value("base_model", "");
    t.checkpoint_prefix = SamplerPrefix(cps.value()[0].prefix);
    t.full = job.value().spec.value("recipe", Json::object()).value("method", std::string("lora")) == "full";
    return t;
  }
  const Json models = ListModels(model_roots);
  if (models.contains(model)) return SampleTarget{models[model].get<std::string>(), "", false};
  std::string known;
  for (const auto& [name, _] : models.items()) known += (known.empty() ? "" : ", ") + name;
  throw Error(
      Code::kNotFound,
      "model: \"" + model + "\" is neither a checkpoint (JOB:step-N, ftckpt-...) nor a model (" + known + ")",
      "model");
}

}  // namespace burst
