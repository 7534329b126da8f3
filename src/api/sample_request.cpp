#include "api/sample_request.h"

#include <cmath>

#include "api/job_request.h"
#include "api/models.h"
#include "api/tinker_wire.h"
#include "core/ids.h"
#include "core/utf8.h"
#include "store/keys.h"
#include "store/object_store.h"

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
  if (!content.is_array() || content.empty()) BadField(at, "must be a string or a non-empty list of text parts");
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

Json Choices(const Json& result, bool chat, bool logprobs) {
  Json choices = Json::array();
  int index = 0;
  for (const Json& s : result.at("samples")) {
    Json lp;
    if (logprobs) {
      if (chat) {
        Json content = Json::array();
        for (size_t i = 0; i < s["tokens"].size(); ++i)
          content.push_back({{"token", s["tokens"][i]}, {"logprob", s["logprobs"][i]}, {"top_logprobs", Json::array()}});
        lp = {{"content", content}};
      } else {
        lp = {{"tokens", s["tokens"]}, {"token_logprobs", s["logprobs"]}, {"top_logprobs", Json()}, {"text_offset", Json()}};
      }
    }
    Json c = {{"index", index++}, {"logprobs", lp}, {"finish_reason", s["finish_reason"]}};
    if (chat) c["message"] = {{"role", "assistant"}, {"content", s["text"]}};
    else c["text"] = s["text"];
    choices.push_back(c);
  }
  return choices;
}

Json Usage(const Json& result) {
  int64_t completion = 0;
  for (const Json& s : result.at("samples")) completion += static_cast<int64_t>(s["token_ids"].size());
  const int64_t prompt = result.value("prompt_tokens", int64_t{0});
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

}  // namespace

Json ParseSampleRequest(const Json& body, bool chat) {
  if (!body.is_object()) BadField("body", "must be a JSON object");
  FieldReader f(body, "");
  Json out;
  out["model"] = f.String("model", "");
  if (out["model"] == "") BadField("model", "required: a checkpoint (JOB:step-N or ftckpt-...) or a model name");
  if (chat) {
    Json msgs = f.Raw("messages");
    if (!msgs.is_array() || msgs.empty()) BadField("messages", "required: a non-empty list of {role, content}");
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
  } else {
    Json prompt = f.Raw("prompt");
    if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) prompt = prompt[0];
    if (!prompt.is_string()) BadField("prompt", "required: a string (one prompt per request)");
    out["prompt"] = prompt;
  }
  const int64_t n = f.Int("n", 1);
  if (n < 1 || n > 16) BadField("n", "must be in 1..16");
  out["n"] = n;
  double temperature = f.Number("temperature", 1.0);
  if (temperature < 0 || temperature > 2 || !std::isfinite(temperature)) BadField("temperature", "must be in 0..2");
  out["temperature"] = temperature;
  double top_p = f.Number("top_p", 1.0);
  if (!(top_p > 0 && top_p <= 1)) BadField("top_p", "must be in (0, 1]");
  out["top_p"] = top_p;
  int64_t max_tokens = f.Int("max_tokens", chat ? 256 : 16);
  if (chat && f.Has("max_completion_tokens")) max_tokens = f.Int("max_completion_tokens", max_tokens);
  if (max_tokens < 1 || max_tokens > 4096) BadField("max_tokens", "must be in 1..4096");
  out["max_tokens"] = max_tokens;
  Json stop = f.Raw("stop");
  if (stop.is_string()) stop = Json::array({stop});
  if (stop.is_null()) stop = Json::array();
  if (!stop.is_array() || stop.size() > 4) BadField("stop", "must be a string or a list of at most 4 strings");
  for (const Json& s : stop)
    if (!s.is_string() || s.get<std::string>().empty()) BadField("stop", "must be non-empty strings");
  out["stop"] = stop;
  Json seed = f.Raw("seed");
  if (!seed.is_null() && !seed.is_number_integer()) BadField("seed", "must be an integer");
  // None given: a fresh one, so calls at temperature > 0 differ as with
  // OpenAI; the response's `burst.seed` says which, to repeat a call.
  out["seed"] = seed.is_null() ? Json(NewSeed()) : seed;
  Json logprobs = f.Raw("logprobs");
  if (chat) {
    if (!logprobs.is_null() && !logprobs.is_boolean()) BadField("logprobs", "must be true or false");
    out["logprobs"] = logprobs.is_boolean() && logprobs.get<bool>();
    NoOp(f, "top_logprobs", 0);
  } else {
    if (!logprobs.is_null() && !(logprobs.is_number_integer() && logprobs.get<int64_t>() == 0)) {
      BadField("logprobs", "Burst returns the sampled tokens' logprobs only: use 0 (or null for none)");
    }
    out["logprobs"] = !logprobs.is_null();
    NoOp(f, "echo", false);
    NoOp(f, "suffix", Json());
    NoOp(f, "best_of", 1);
  }
  Json stream = f.Raw("stream");
  if (!stream.is_null() && !stream.is_boolean()) BadField("stream", "must be true or false");
  out["stream"] = stream == true;
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

std::string CheckpointModelName(const std::string& job_id, int64_t step) {
  return job_id + ":step-" + std::to_string(step);
}

std::string CheckpointId(const std::string& job_id, int64_t step) {
  return "ftckpt-" + job_id.substr(job_id.find('-') + 1) + "-" + std::to_string(step);
}

std::optional<CheckpointName> ParseCheckpointName(std::string_view name) {
  const auto is_id = [](std::string_view id) {
    if (id.empty() || id.size() > 64) return false;
    for (char c : id)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
    return true;
  };
  // A step: a positive decimal, no sign, no leading zero, nothing after it.
  const auto step_of = [](std::string_view digits) -> int64_t {
    if (digits.empty() || digits.size() > 18 || digits[0] == '0') return -1;
    int64_t v = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return -1;
      v = v * 10 + (c - '0');
    }
    return v;
  };
  std::string_view id, digits;
  if (name.substr(0, 6) == "ftjob-") {
    const size_t colon = name.find(":step-");
    if (colon == std::string_view::npos) return std::nullopt;
    id = name.substr(6, colon - 6);
    digits = name.substr(colon + 6);
  } else if (name.substr(0, 7) == "ftckpt-") {
    const size_t dash = name.rfind('-');
    if (dash < 7) return std::nullopt;
    id = name.substr(7, dash - 7);
    digits = name.substr(dash + 1);
  } else {
    return std::nullopt;
  }
  const int64_t step = step_of(digits);
  if (!is_id(id) || step <= 0) return std::nullopt;
  return CheckpointName{"ftjob-" + std::string(id), step};
}

SampleTarget ResolveSampleModel(const std::string& model, const std::string& org_id, Metadata& md,
                                const std::vector<fs::path>& model_roots, const ObjectStore* store) {
  if (model.rfind("tinker://", 0) == 0) {
    const TinkerPath p = ParseTinkerPath(model, "model");
    if (p.kind != "sampler_weights") BadField("model", "must name sampler weights (tinker://RUN/sampler_weights/NAME)");
    const std::string prefix = LoopCheckpointPrefix(LoopPrefix(org_id, p.run), p.kind, p.name);
    auto cfg = store ? store->Get(prefix + "adapter_config.json") : Result<std::string>(Status(Code::kNotFound, ""));
    if (!cfg.ok()) throw Error(Code::kNotFound, "model: no checkpoint " + model, "model");
    const Json c = ParseJson(cfg.value(), "adapter_config.json");
    const std::string base = c.value("base_model_name_or_path", "");
    const Json models = ListModels(model_roots);
    if (!models.contains(base)) throw Error(Code::kNotFound, "model: the base model of " + model + " is gone", "model");
    return SampleTarget{models[base].get<std::string>(), prefix, false};
  }
  std::string job_id;
  int64_t step = -1;
  if (model.find(":step-") != std::string::npos || model.rfind("ftckpt-", 0) == 0) {
    const std::optional<CheckpointName> name = ParseCheckpointName(model);
    if (!name) {
      throw Error(Code::kInvalidArgument,
                  "model: \"" + ToValidUtf8(model) +
                      "\" is not a checkpoint name: use JOB:step-N or ftckpt-..., as GET "
                      "/v1/fine_tuning/jobs/JOB/checkpoints lists them",
                  "model");
    }
    job_id = name->job_id;
    step = name->step;
  }
  if (!job_id.empty()) {
    auto job = md.GetJob(org_id, job_id);
    auto cps = step > 0 && job.ok() ? md.ListCheckpoints(job_id, step + 1, 1) : Result<std::vector<CheckpointRecord>>(Status());
    if (!job.ok() || !cps.ok() || cps.value().empty() || cps.value()[0].step != step) {
      throw Error(Code::kNotFound, "model: no checkpoint " + model + " (see GET /v1/fine_tuning/jobs/JOB/checkpoints)",
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
  throw Error(Code::kNotFound,
              "model: \"" + model + "\" is neither a checkpoint (JOB:step-N, ftckpt-...) nor a model (" + known + ")",
              "model");
}

Json RenderStreamChunk(const std::string& id, const std::string& model, const Json& request, const Json& piece,
                       int64_t created, bool chat, bool first) {
  const bool logprobs = request.value("logprobs", false) && piece["token"].is_string();
  const bool final = piece["finish_reason"].is_string();
  const std::string delta = piece.value("delta", std::string());
  if (delta.empty() && !final && !logprobs && !(chat && first)) return Json();
  Json lp;
  if (logprobs) {
    lp = chat ? Json{{"content", {{{"token", piece["token"]}, {"logprob", piece["logprob"]}, {"top_logprobs", Json::array()}}}}}
              : Json{{"tokens", {piece["token"]}}, {"token_logprobs", {piece["logprob"]}}, {"top_logprobs", Json()},
                     {"text_offset", Json()}};
  }
  Json choice = {{"index", piece["index"]}, {"logprobs", lp}, {"finish_reason", piece["finish_reason"]}};
  if (chat) {
    Json d = Json::object();
    if (first) d["role"] = "assistant";
    if (!delta.empty() || (first && !final)) d["content"] = delta;
    choice["delta"] = d;
  } else {
    choice["text"] = delta;
  }
  Json chunk = {{"id", id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", {choice}}};
  if (request.value("include_usage", false)) chunk["usage"] = nullptr;  // the last chunk has it
  return chunk;
}

Json RenderStreamUsage(const std::string& id, const std::string& model, const Json& result, int64_t created,
                       bool chat) {
  return {{"id", id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", Json::array()},
          {"usage", Usage(result)}};
}

Json RenderCompletion(const std::string& id, const std::string& model, const Json& request, const Json& result,
                      int64_t created, const Json& extra) {
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", Choices(result, false, request.value("logprobs", false))},
          {"usage", Usage(result)},
          {"burst", extra}};
}

Json RenderChatCompletion(const std::string& id, const std::string& model, const Json& request, const Json& result,
                          int64_t created, const Json& extra) {
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", Choices(result, true, request.value("logprobs", false))},
          {"usage", Usage(result)},
          {"burst", extra}};
}

}  // namespace burst
