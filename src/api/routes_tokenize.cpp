// A model's tokenizer over HTTP, for clients that build token-level data
// (training loops) without the tokenizer files: POST /v1/tokenize (text, or
// chat messages rendered with the model's chat template, with the loss
// weights a supervised datum wants) and POST /v1/detokenize.
//
// Tokenizers are loaded once per model folder and kept (a handful).
#include <list>
#include <memory>
#include <mutex>

#include "api/context.h"
#include "api/tinker_wire.h"
#include "model/tokenizer.h"
#include "train/chat_template.h"

namespace burst {
namespace {

constexpr size_t kKeptTokenizers = 8;
constexpr size_t kMaxTokens = 1 << 20;

std::shared_ptr<const Tokenizer> TokenizerOf(const std::string& dir) {
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<const Tokenizer>>> kept;  // most recent first
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = kept.begin(); it != kept.end(); ++it) {
      if (it->first != dir) continue;
      kept.splice(kept.begin(), kept, it);
      return kept.front().second;
    }
  }
  std::shared_ptr<const Tokenizer> t = LoadTokenizer(dir);  // outside the lock: loading takes a while
  std::lock_guard<std::mutex> lock(mu);
  kept.emplace_front(dir, t);
  while (kept.size() > kKeptTokenizers) kept.pop_back();
  return t;
}

void Tokenize(ApiContext& ctx, const Json& body, http::Response& res) {
  FieldReader f(body, "");
  const std::string model = f.String("model", "");
  const Json text = f.Raw("text"), messages = f.Raw("messages");
  const bool generation = f.Bool("add_generation_prompt", false);
  const bool special = f.Bool("allow_special", false);
  Json kwargs = f.Raw("chat_template_kwargs");
  f.RejectUnknown();
  if (kwargs.is_null()) kwargs = Json::object();
  CheckTemplateKwargs(kwargs, "chat_template_kwargs");
  if (model.empty()) BadField("model", "is required");
  auto tok = TokenizerOf(ResolveBaseModel(model, ctx.opt.model_roots));
  if (text.is_string() == messages.is_array()) BadField("text", "give either text or messages");
  if (text.is_string()) {
    return SendJson(res, 200, {{"tokens", tok->Encode(text.get<std::string>(), special)}});
  }
  std::vector<ChatMessage> chat;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!messages[i].is_object()) BadField(at, "must be {role, content}");
    FieldReader m(messages[i], at);
    ChatMessage cm;
    cm.role = m.String("role", "");
    cm.content = m.String("content", "");
    cm.weight = static_cast<float>(m.Number("weight", 1.0));
    m.RejectUnknown();
    if (cm.role != "system" && cm.role != "user" && cm.role != "assistant") {
      BadField(at + ".role", "must be system, user or assistant");
    }
    chat.push_back(std::move(cm));
  }
  const ChatTemplate t = ResolveChatTemplate("auto", *tok, kwargs);
  RenderedChat r = RenderChat(chat, t, *tok, generation);
  SendJson(res, 200,
           {{"tokens", r.ids},
            {"weights", r.weights},
            {"prompt_tokens", r.prompt_len},
            {"end_of_turn", EndOfTurnId(t, *tok)},
            {"template", ChatTemplateName(t)}});
}

void Detokenize(ApiContext& ctx, const Json& body, http::Response& res) {
  FieldReader f(body, "");
  const std::string model = f.String("model", "");
  const Json tokens = f.Raw("tokens");
  const bool skip = f.Bool("skip_special", false);
  f.RejectUnknown();
  if (model.empty()) BadField("model", "is required");
  if (!tokens.is_array() || tokens.size() > kMaxTokens)
    BadField("tokens", "must be a list of token ids (at most 1M)");
  auto tok = TokenizerOf(ResolveBaseModel(model, ctx.opt.model_roots));
  std::vector<int> ids;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Json& id = tokens[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tok->vocab_size()) {
      BadField("tokens[" + std::to_string(i) + "]", "is not a token id of " + model);
    }
    ids.push_back(id.get<int>());
  }
  SendJson(res, 200, {{"text", tok->Decode(ids, skip)}});
}

}  // namespace

void AddTokenizeRoutes(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  using Fn = void (*)(ApiContext&, const Json&, http::Response&);
  for (const auto& route : {std::pair<const char*, Fn>{"/v1/tokenize", &Tokenize},
                            std::pair<const char*, Fn>{"/v1/detokenize", &Detokenize}}) {
    const Fn fn = route.second;  // (clang 14 cannot capture a structured binding)
    routes.Post(route.first, [c, fn](const ApiKey&, const http::Request& q, http::Response& r) {
      auto body = ReadBody(q, r);
      if (!body) return;
      fn(*c, *body, r);
    });
  }
}

}  // namespace burst
