#include "model/sample_render.h"

namespace burst {
namespace {

Json Bytes(const Json& token) {
  Json out = Json::array();
  for (unsigned char c : token.get<std::string>()) out.push_back(static_cast<int>(c));
  return out;
}

// Chat's form of one token: {token, logprob, bytes, top_logprobs: [...]};
// `top` is the worker's [[text, logprob], ...] (null when not asked).
Json ChatToken(const Json& token, const Json& logprob, const Json& top) {
  Json alternatives = Json::array();
  if (top.is_array()) {
    for (const Json& a : top)
      alternatives.push_back({{"token", a[0]}, {"logprob", a[1]}, {"bytes", Bytes(a[0])}});
  }
  return {{"token", token}, {"logprob", logprob}, {"bytes", Bytes(token)}, {"top_logprobs", alternatives}};
}

// The completions' form of a position's alternatives: {text: logprob}
// (null where there are none: the prompt's first token).
Json TopMap(const Json& top) {
  if (!top.is_array()) return Json();
  Json m = Json::object();
  for (const Json& a : top) {
    const std::string t = a[0].get<std::string>();
    if (!m.contains(t)) m[t] = a[1];  // likeliest first: two ids that print alike keep the likelier
  }
  return m;
}

Json At(const Json& list, size_t i) { return list.is_array() && i < list.size() ? list[i] : Json(); }

// The legacy completions' logprobs of the tokens in `tokens` (appended to
// `lp`), their text offsets counted from `offset`.
void AppendCompletionLogprobs(Json& lp, const Json& tokens, const Json& logprobs, const Json& top,
                              bool with_top, size_t offset) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    lp["tokens"].push_back(tokens[i]);
    lp["token_logprobs"].push_back(At(logprobs, i));
    if (with_top) lp["top_logprobs"].push_back(TopMap(At(top, i)));
    lp["text_offset"].push_back(offset);
    offset += tokens[i].get<std::string>().size();
  }
}

Json Choices(const Json& request, const Json& result, bool chat) {
  const bool logprobs = request.value("logprobs", false);
  const bool with_top = request.value("top_logprobs", int64_t{0}) > 0;
  const bool echo = request.value("echo", false);
  // The prompt as echoed: as the caller wrote it, or its ids decoded.
  std::string prompt_text;
  if (echo)
    prompt_text = request.contains("prompt") ? request["prompt"].get<std::string>()
                                             : result.value("prompt", Json::object()).value("text", "");
  Json choices = Json::array();
  int index = 0;
  for (const Json& s : result.at("samples")) {
    Json lp;
    const Json top = s.value("top_logprobs", Json());
    if (logprobs && chat) {
      Json content = Json::array();
      for (size_t i = 0; i < s["tokens"].size(); ++i)
        content.push_back(ChatToken(s["tokens"][i], s["logprobs"][i], At(top, i)));
      lp = {{"content", content}, {"refusal", nullptr}};
    } else if (logprobs) {
      lp = {{"tokens", Json::array()},
            {"token_logprobs", Json::array()},
            {"top_logprobs", Json::array()},
            {"text_offset", Json::array()}};
      const Json prompt = result.value("prompt", Json());
      if (echo && prompt.is_object()) {
        AppendCompletionLogprobs(lp, prompt["tokens"], prompt["logprobs"],
                                 prompt.value("top_logprobs", Json()), with_top, 0);
      }
      AppendCompletionLogprobs(lp, s["tokens"], s["logprobs"], top, with_top, prompt_text.size());
      if (!with_top) lp["top_logprobs"] = nullptr;
    }
    Json c = {{"index", index++}, {"logprobs", lp}, {"finish_reason", s["finish_reason"]}};
    if (chat)
      c["message"] = {{"role", "assistant"}, {"content", s["text"]}, {"refusal", nullptr}};
    else
      c["text"] = prompt_text + s["text"].get<std::string>();
    choices.push_back(c);
  }
  return choices;
}

Json Usage(const Json& result) {
  int64_t completion = 0;
  for (const Json& s : result.at("samples")) completion += static_cast<int64_t>(s["token_ids"].size());
  const int64_t prompt = result.value("prompt_tokens", int64_t{0});
  return {
      {"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

}  // namespace

Json RenderStreamChunk(const std::string& id, const std::string& model, const Json& request,
                       const Json& piece, int64_t created, bool chat, bool first) {
  const bool logprobs = request.value("logprobs", false) && piece["token"].is_string();
  const bool final = piece["finish_reason"].is_string();
  const std::string delta = piece.value("delta", std::string());
  if (delta.empty() && !final && !logprobs && !(chat && first)) return Json();
  Json lp;
  if (logprobs) {
    const Json top = piece.value("top", Json());
    if (chat) {
      lp = {{"content", {ChatToken(piece["token"], piece["logprob"], top)}}, {"refusal", nullptr}};
    } else {
      const bool with_top = request.value("top_logprobs", int64_t{0}) > 0;
      lp = {{"tokens", {piece["token"]}},
            {"token_logprobs", {piece["logprob"]}},
            {"top_logprobs", with_top ? Json::array({TopMap(top)}) : Json()},
            {"text_offset", Json()}};
    }
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

Json RenderCompletion(const std::string& id, const std::string& model, const Json& request,
                      const Json& result, int64_t created, const Json& extra) {
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", Choices(request, result, false)},
          {"usage", Usage(result)},
          {"burst", extra}};
}

Json RenderChatCompletion(const std::string& id, const std::string& model, const Json& request,
                          const Json& result, int64_t created, const Json& extra) {
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", Choices(request, result, true)},
          {"usage", Usage(result)},
          {"burst", extra}};
}

}  // namespace burst
