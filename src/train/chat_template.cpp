#include "train/chat_template.h"

#include <functional>

#include "core/status.h"

namespace burst {
namespace {

int SpecialId(const Tokenizer& tok, const std::string& piece, ChatTemplate tmpl) {
  auto id = tok.PieceToId(piece);
  if (!id) {
    throw Error(Code::kInvalidArgument,
                std::string("the tokenizer has no ") + piece + " token, which the " +
                    ChatTemplateName(tmpl) + " chat template needs; set \"template\" to match the model",
                "template");
  }
  return *id;
}

class Builder {
 public:
  explicit Builder(const Tokenizer& tok) : tok_(tok) {}
  void Special(int id, float w) {
    out.ids.push_back(id);
    out.weights.push_back(w);
  }
  void Text(const std::string& text, float w) {
    if (text.empty()) return;
    for (int id : tok_.Encode(text, /*allow_special=*/false)) Special(id, w);
  }
  RenderedChat out;

 private:
  const Tokenizer& tok_;
};

}  // namespace

const char* ChatTemplateName(ChatTemplate t) { return t == ChatTemplate::kLlama3 ? "llama3" : "chatml"; }

ChatTemplate ResolveChatTemplate(const std::string& name, const Tokenizer& tok) {
  if (name == "llama3") return ChatTemplate::kLlama3;
  if (name == "chatml") return ChatTemplate::kChatML;
  if (name != "auto") {
    throw Error(Code::kInvalidArgument, "unknown template \"" + name + "\" (auto, llama3, chatml)",
                "template");
  }
  if (tok.chat_template.find("<|start_header_id|>") != std::string::npos) return ChatTemplate::kLlama3;
  if (tok.chat_template.find("<|im_start|>") != std::string::npos) return ChatTemplate::kChatML;
  if (tok.PieceToId("<|start_header_id|>")) return ChatTemplate::kLlama3;
  if (tok.PieceToId("<|im_start|>")) return ChatTemplate::kChatML;
  throw Error(Code::kInvalidArgument,
              "template auto: the model's tokenizer has neither Llama 3 nor ChatML special tokens; "
              "chat data needs one of them",
              "template");
}

int EndOfTurnId(ChatTemplate tmpl, const Tokenizer& tok) {
  return SpecialId(tok, tmpl == ChatTemplate::kLlama3 ? "<|eot_id|>" : "<|im_end|>", tmpl);
}

RenderedChat RenderChat(const std::vector<ChatMessage>& messages, ChatTemplate tmpl,
                        const Tokenizer& tok, bool add_generation_prompt) {
  Builder b(tok);
  const int end = EndOfTurnId(tmpl, tok);
  size_t last_assistant = messages.size();
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "assistant") last_assistant = i;
  // The two templates differ only in how a turn opens and what follows its
  // end token; everything about loss weights is shared.
  std::function<void(const std::string&)> open_turn;
  // A C string: GCC 12 -O3 warns (-Wrestrict, a false positive) on
  // assigning a literal to a std::string here.
  const char* after_turn = "";
  if (tmpl == ChatTemplate::kLlama3) {
    const int start = SpecialId(tok, "<|start_header_id|>", tmpl);
    const int stop = SpecialId(tok, "<|end_header_id|>", tmpl);
    b.Special(SpecialId(tok, "<|begin_of_text|>", tmpl), 0);
    open_turn = [&, start, stop](const std::string& role) {
      b.Special(start, 0);
      b.Text(role, 0);
      b.Special(stop, 0);
      b.Text("\n\n", 0);
    };
  } else {
    const int start = SpecialId(tok, "<|im_start|>", tmpl);
    if (tok.bos_id && *tok.bos_id != start && *tok.bos_id != end) b.Special(*tok.bos_id, 0);
    open_turn = [&, start](const std::string& role) {
      b.Special(start, 0);
      b.Text(role + "\n", 0);
    };
    after_turn = "\n";
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    open_turn(m.role);
    if (i == last_assistant) b.out.prompt_len = b.out.ids.size();
    float w = m.role == "assistant" ? m.weight : 0.0f;
    size_t content_start = b.out.ids.size();
    b.Text(m.content, w);
    b.Special(end, w);
    if (i == last_assistant)
      b.out.completion_ids.assign(b.out.ids.begin() + static_cast<long>(content_start), b.out.ids.end());
    b.Text(after_turn, 0);
  }
  if (add_generation_prompt) {
    open_turn("assistant");
    b.out.prompt_len = b.out.ids.size();
  }
  return std::move(b.out);
}

}  // namespace burst
