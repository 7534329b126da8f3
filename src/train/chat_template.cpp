#include "train/chat_template.h"

#include <functional>

#include "core/status.h"
#include "core/utc.h"
#include "train/chat_jinja.h"

namespace burst {
namespace {

int SpecialId(const Tokenizer& tok, const std::string& piece, const ChatTemplate& tmpl) {
  auto id = tok.PieceToId(piece);
  if (!id) {
    throw Error(Code::kInvalidArgument,
                std::string("the tokenizer has no ") + piece + " token, which the " + ChatTemplateName(tmpl) +
                    " chat template needs; set \"template\" to match the model",
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

// "04 Dec 2026", UTC: the date transformers' strftime_now("%d %b %Y") gives.
std::string TodayUtc() { return UtcNow("%d %b %Y"); }

// Jinja's `trim`: whitespace off both ends.
std::string Trimmed(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t a = s.find_first_not_of(ws);
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(ws) - a + 1);
}

// Python's str.lstrip('\n') / rstrip('\n').
std::string LstripNewlines(const std::string& s) {
  const size_t a = s.find_first_not_of('\n');
  return a == std::string::npos ? "" : s.substr(a);
}
std::string RstripNewlines(const std::string& s) {
  const size_t b = s.find_last_not_of('\n');
  return b == std::string::npos ? "" : s.substr(0, b + 1);
}

// Qwen 3's template on each assistant message (ChatTemplateExtras::think),
// line for line: the reasoning split off at "</think>", and the block
// written back on the turns after the last user message.
void ApplyThinkBlocks(std::vector<ChatMessage>& messages) {
  size_t last_query = messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role == "user") {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    ChatMessage& m = messages[i];
    if (m.role != "assistant") continue;
    std::string content = m.content, reasoning;
    const size_t close = content.find("</think>");
    if (close != std::string::npos) {
      content = LstripNewlines(m.content.substr(m.content.rfind("</think>") + 8));
      reasoning = RstripNewlines(m.content.substr(0, close));
      const size_t open = reasoning.rfind("<think>");
      if (open != std::string::npos) reasoning = reasoning.substr(open + 7);
      reasoning = LstripNewlines(reasoning);
    }
    if (i > last_query && (i + 1 == messages.size() || !reasoning.empty())) {
      m.content = "<think>\n" + RstripNewlines(LstripNewlines(reasoning)) + "\n</think>\n\n" +
                  LstripNewlines(content);
    } else {
      m.content = content;
    }
  }
}

// The Jinja string literal in `tmpl` right after `marker` up to its first
// escape or quote ("" when the marker is not there).
std::string LiteralAfter(const std::string& tmpl, const std::string& marker) {
  const size_t at = tmpl.find(marker);
  if (at == std::string::npos) return "";
  const size_t from = at + marker.size();
  const size_t end = tmpl.find_first_of("\\\"'", from);
  return end == std::string::npos ? "" : tmpl.substr(from, end - from);
}

}  // namespace

ChatTemplateExtras ReadChatTemplateExtras(ChatTemplateKind kind, const std::string& text) {
  ChatTemplateExtras x;
  if (kind == ChatTemplateKind::kLlama3) {
    x.trim = text.find("| trim") != std::string::npos || text.find("|trim") != std::string::npos;
    x.knowledge_date = LiteralAfter(text, "Cutting Knowledge Date: ");
    if (!x.knowledge_date.empty()) {
      x.date = LiteralAfter(text, "set date_string = \"");
      if (x.date.empty()) x.date = "26 Jul 2024";  // what Llama 3.1's template renders without one
    }
  } else {
    x.think =
        text.find("reasoning_content") != std::string::npos && text.find("</think>") != std::string::npos;
    // The system turn a template writes when the messages have none:
    // '<|im_start|>system\nTEXT<|im_end|>' as a literal (Qwen 2.5's).
    const std::string open = "'<|im_start|>system\\n";
    for (size_t at = text.find(open); at != std::string::npos; at = text.find(open, at + 1)) {
      const size_t from = at + open.size();
      const size_t end = text.find("<|im_end|>", from);
      if (end == std::string::npos) break;
      const std::string literal = text.substr(from, end - from);
      if (!literal.empty() && literal.find_first_of("'\"+{}") == std::string::npos) {
        x.default_system = literal;
        break;
      }
    }
  }
  return x;
}

const char* ChatTemplateName(const ChatTemplate& t) {
  switch (t.kind) {
    case ChatTemplateKind::kLlama3:
      return "llama3";
    case ChatTemplateKind::kChatML:
      return "chatml";
    case ChatTemplateKind::kModel:
      return "model";
  }
  return "";
}

void CheckTemplateKwargs(const Json& kwargs, const std::string& param) {
  if (!kwargs.is_object()) BadField(param, "must be an object of template variables");
  if (kwargs.size() > 32) BadField(param, "at most 32 variables");
  for (const auto& [k, v] : kwargs.items()) {
    for (const char* reserved : {"messages", "add_generation_prompt", "tools", "documents", "bos_token",
                                 "eos_token", "pad_token", "strftime_now", "raise_exception"}) {
      if (k == reserved) BadField(param + "." + k, "is set by Burst, not by the request");
    }
  }
}

ChatTemplate ResolveChatTemplate(const std::string& name, const Tokenizer& tok, const Json& kwargs) {
  CheckTemplateKwargs(kwargs, "template_kwargs");
  if (!kwargs.empty() && (name == "llama3" || name == "chatml"))
    BadField("template_kwargs", "applies to the model's own chat_template, not to " + name);
  if (name == "llama3") return {ChatTemplateKind::kLlama3, nullptr};
  if (name == "chatml") return {ChatTemplateKind::kChatML, nullptr};
  if (name != "auto" && name != "model") {
    throw Error(Code::kInvalidArgument, "unknown template \"" + name + "\" (auto, model, llama3, chatml)",
                "template");
  }
  // A SentencePiece model with a ChatML or Llama 3 template (Burst's own
  // burst-small) was trained on the written-out renderer, which encodes a
  // turn's pieces one by one: each with SentencePiece's leading space.
  // `auto` keeps that for them; `model` renders their template.
  const bool sp_written_out = name == "auto" && kwargs.empty() && tok.kind == "sentencepiece" &&
                              (tok.chat_template.find("<|im_start|>") != std::string::npos ||
                               tok.chat_template.find("<|start_header_id|>") != std::string::npos);
  if (!tok.chat_template.empty() && !sp_written_out)
    return {ChatTemplateKind::kModel, LoadModelTemplate(tok), kwargs};
  if (name == "model") {
    throw Error(
        Code::kInvalidArgument,
        "template model: the model's tokenizer files have no chat_template; use auto, llama3 or chatml",
        "template");
  }
  if (!kwargs.empty())
    BadField("template_kwargs", "the model's tokenizer files have no chat_template to pass them to");
  if (tok.PieceToId("<|start_header_id|>")) return {ChatTemplateKind::kLlama3, nullptr};
  if (tok.PieceToId("<|im_start|>")) return {ChatTemplateKind::kChatML, nullptr};
  throw Error(Code::kInvalidArgument,
              "template auto: the model's tokenizer has neither Llama 3 nor ChatML special tokens; "
              "chat data needs one of them",
              "template");
}

int EndOfTurnId(const ChatTemplate& tmpl, const Tokenizer& tok) {
  if (tmpl.kind == ChatTemplateKind::kModel) return tmpl.model->end_of_turn;
  return SpecialId(tok, tmpl.kind == ChatTemplateKind::kLlama3 ? "<|eot_id|>" : "<|im_end|>", tmpl);
}

RenderedChat RenderChat(const std::vector<ChatMessage>& in, const ChatTemplate& tmpl, const Tokenizer& tok,
                        bool add_generation_prompt, ChatDate date) {
  if (tmpl.kind == ChatTemplateKind::kModel)
    return RenderModelChat(*tmpl.model, tmpl.kwargs, in, tok, add_generation_prompt, date);
  // What the model's own template adds: a system turn (Llama 3.1+'s dates,
  // Qwen 2.5's default system message) and trimmed contents (Llama 3's).
  const ChatTemplateExtras extras = ReadChatTemplateExtras(tmpl.kind, tok.chat_template);
  std::vector<ChatMessage> messages;
  const bool has_system = !in.empty() && in[0].role == "system";
  if (!extras.knowledge_date.empty()) {
    const std::string day = date == ChatDate::kToday ? TodayUtc() : extras.date;
    ChatMessage sys{"system",
                    "Cutting Knowledge Date: " + extras.knowledge_date + "\nToday Date: " + day + "\n\n"};
    if (has_system) sys.content += Trimmed(in[0].content);
    messages.push_back(sys);
    messages.insert(messages.end(), in.begin() + (has_system ? 1 : 0), in.end());
  } else {
    if (!has_system && !extras.default_system.empty()) messages.push_back({"system", extras.default_system});
    messages.insert(messages.end(), in.begin(), in.end());
  }
  if (extras.trim) {
    for (size_t i = extras.knowledge_date.empty() ? 0 : 1; i < messages.size(); ++i) {
      messages[i].content = Trimmed(messages[i].content);
    }
  }
  if (extras.think) ApplyThinkBlocks(messages);
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
  if (tmpl.kind == ChatTemplateKind::kLlama3) {
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
