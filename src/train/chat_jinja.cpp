#include "train/chat_jinja.h"

#include <algorithm>
#include <cstddef>

#include "core/status.h"
#include "core/utc.h"
#include "train/chat_template.h"

namespace burst {
namespace {

struct Special {
  size_t pos, len;
  int id;
};

// The control tokens the template itself wrote, leftmost-longest: only
// where every byte came from the template's text.
std::vector<Special> FindSpecials(const jinja::Text& t, const Tokenizer& tok) {
  std::vector<std::pair<std::string, int>> texts = tok.SpecialTexts();
  std::sort(texts.begin(), texts.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::vector<Special> out;
  const std::string& s = t.s;
  for (size_t p = 0; p < s.size();) {
    const Special* found = nullptr;
    Special cand{};
    if (t.from_data[p] == 0) {
      for (const auto& [text, id] : texts) {
        if (text.empty() || s.compare(p, text.size(), text) != 0) continue;
        const auto from = t.from_data.begin() + static_cast<std::ptrdiff_t>(p);
        if (std::find(from, from + static_cast<std::ptrdiff_t>(text.size()), '\1') !=
            from + static_cast<std::ptrdiff_t>(text.size()))
          continue;  // a message's bytes
        cand = {p, text.size(), id};
        found = &cand;
        break;
      }
    }
    if (found) {
      out.push_back(cand);
      p += cand.len;
    } else {
      ++p;
    }
  }
  return out;
}

struct Encoded {
  std::vector<int> ids;
  std::vector<size_t> starts;  // the byte each token starts at
};

// Text between control tokens, encoded whole as transformers does. Each
// token's start comes from its bytes; where they do not add up (a
// tokenizer that normalizes), the text is encoded in parts cut at `cuts`
// so that every weight boundary is a token boundary.
void EncodeText(const std::string& s, size_t a, size_t b, const Tokenizer& tok,
                const std::vector<size_t>& cuts, Encoded& out) {
  if (a >= b) return;
  const std::vector<int> ids = tok.Encode(std::string_view(s).substr(a, b - a), /*allow_special=*/false);
  std::vector<size_t> starts;
  size_t at = a;
  for (int id : ids) {
    starts.push_back(at);
    at += tok.Decode({id}).size();
  }
  if (at == b) {
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.starts.insert(out.starts.end(), starts.begin(), starts.end());
    return;
  }
  size_t from = a;
  for (size_t c : cuts) {
    if (c <= from || c >= b) continue;
    for (int id : tok.Encode(std::string_view(s).substr(from, c - from), false)) {
      out.ids.push_back(id);
      out.starts.push_back(from);
    }
    from = c;
  }
  for (int id : tok.Encode(std::string_view(s).substr(from, b - from), false)) {
    out.ids.push_back(id);
    out.starts.push_back(from);
  }
}

Encoded Encode(const jinja::Text& t, const std::vector<Special>& specials, const Tokenizer& tok,
               const std::vector<size_t>& cuts) {
  Encoded out;
  size_t at = 0;
  for (const Special& sp : specials) {
    EncodeText(t.s, at, sp.pos, tok, cuts, out);
    out.ids.push_back(sp.id);
    out.starts.push_back(sp.pos);
    at = sp.pos + sp.len;
  }
  EncodeText(t.s, at, t.s.size(), tok, cuts, out);
  return out;
}

jinja::Value TokenText(const Tokenizer& tok, const std::optional<int>& id) {
  if (!id) return jinja::Value::None();
  return jinja::Value::Literal(tok.IdToPiece(*id));
}

jinja::Rendered RenderText(const jinja::Template& tmpl, const std::vector<ChatMessage>& messages,
                           const Tokenizer& tok, bool add_generation_prompt, ChatDate date,
                           const Json& kwargs = Json::object()) {
  jinja::List list;
  jinja::RenderOptions opt;
  for (const ChatMessage& m : messages) {
    auto d = std::make_shared<jinja::Dict>();
    d->Set(jinja::Text::Literal("role"), jinja::Value::Str(jinja::Text::Data(m.role)));
    d->Set(jinja::Text::Literal("content"), jinja::Value::Str(jinja::Text::Data(m.content)));
    opt.owners.push_back(d.get());
    list.push_back(jinja::Value::MakeDict(std::move(d)));
  }
  // The variables transformers passes: the conversation, its flags and the
  // tokenizer's special tokens.
  jinja::Dict ctx;
  for (const auto& [k, v] : kwargs.items()) ctx.Set(jinja::Text::Literal(k), jinja::FromJson(v));
  ctx.Set(jinja::Text::Literal("messages"), jinja::Value::MakeList(std::move(list)));
  ctx.Set(jinja::Text::Literal("add_generation_prompt"), jinja::Value::Bool(add_generation_prompt));
  ctx.Set(jinja::Text::Literal("tools"), jinja::Value::None());
  ctx.Set(jinja::Text::Literal("documents"), jinja::Value::None());
  if (tok.bos_id) ctx.Set(jinja::Text::Literal("bos_token"), TokenText(tok, tok.bos_id));
  if (tok.eos_id) ctx.Set(jinja::Text::Literal("eos_token"), TokenText(tok, tok.eos_id));
  if (tok.pad_id) ctx.Set(jinja::Text::Literal("pad_token"), TokenText(tok, tok.pad_id));
  if (date == ChatDate::kToday) {
    ctx.Set(jinja::Text::Literal("strftime_now"),
            jinja::Value::MakeFunction("strftime_now", [](const jinja::Args& a) {
              const jinja::Value& f = a.Get(0, "format");
              if (!f.is_string() || f.str().size() > 64)
                jinja::Fail("strftime_now: a format of up to 64 bytes");
              return jinja::Value::Literal(UtcNow(f.str().c_str()));
            }));
  }
  try {
    return jinja::Render(tmpl, ctx, opt);
  } catch (const Error& e) {
    throw Error(Code::kInvalidArgument, e.status().message(), "messages");
  }
}

struct Turn {
  size_t begin = 0, end = 0;  // the trained bytes
  bool found = false;
};

// The trained part of message i's turn (see the header).
Turn AssistantTurn(const jinja::Rendered& r, const std::vector<Special>& specials, int i,
                   const std::string& generation_prompt) {
  Turn t;
  const auto first = std::find(r.owner.begin(), r.owner.end(), i);
  if (first == r.owner.end()) return t;
  t.found = true;
  t.begin = static_cast<size_t>(first - r.owner.begin());
  t.end =
      r.owner.size() - static_cast<size_t>(std::find(r.owner.rbegin(), r.owner.rend(), i) - r.owner.rbegin());
  if (!generation_prompt.empty() &&
      r.text.s.compare(t.begin, generation_prompt.size(), generation_prompt) == 0 &&
      t.begin + generation_prompt.size() <= t.end)
    t.begin += generation_prompt.size();
  for (auto it = specials.rbegin(); it != specials.rend(); ++it) {
    if (it->pos >= t.begin && it->pos + it->len <= t.end) {
      t.end = it->pos + it->len;
      break;
    }
  }
  return t;
}

}  // namespace

std::shared_ptr<const ModelTemplate> LoadModelTemplate(const Tokenizer& tok) {
  auto mt = std::make_shared<ModelTemplate>();
  mt->tmpl = jinja::Parse(tok.chat_template, "chat_template");
  try {
    const std::vector<ChatMessage> ask = {{"user", "Hi", 0}};
    const std::string plain = RenderText(*mt->tmpl, ask, tok, false, ChatDate::kTemplateDefault).text.s;
    const std::string open = RenderText(*mt->tmpl, ask, tok, true, ChatDate::kTemplateDefault).text.s;
    if (open.compare(0, plain.size(), plain) == 0) mt->generation_prompt = open.substr(plain.size());
    const std::vector<ChatMessage> chat = {{"user", "Hi", 0}, {"assistant", "Hello", 1}};
    const jinja::Rendered r = RenderText(*mt->tmpl, chat, tok, false, ChatDate::kTemplateDefault);
    const std::vector<Special> specials = FindSpecials(r.text, tok);
    // A template that opens an assistant turn whether asked or not (the
    // first Llama 3 release's) shows no generation prompt; its header is
    // then what the template writes before the assistant's content.
    if (mt->generation_prompt.empty()) {
      const auto first = std::find(r.owner.begin(), r.owner.end(), 1);
      const size_t begin = static_cast<size_t>(first - r.owner.begin());
      const size_t content = r.text.s.find(chat[1].content, begin);
      if (content < r.owner.size() && r.owner[content] == 1)
        mt->generation_prompt = r.text.s.substr(begin, content - begin);
    }
    const Turn t = AssistantTurn(r, specials, 1, mt->generation_prompt);
    for (const Special& s : specials)
      if (t.found && s.pos + s.len == t.end) mt->end_of_turn = s.id;
  } catch (const Error& e) {
    throw Error(Code::kInvalidArgument,
                "chat_template: rendering a user and an assistant message failed: " + e.status().message(),
                "chat_template");
  }
  if (mt->end_of_turn < 0) {
    if (!tok.eos_id) {
      throw Error(Code::kInvalidArgument,
                  "chat_template: no control token ends an assistant turn and the tokenizer has no eos_token",
                  "chat_template");
    }
    mt->end_of_turn = *tok.eos_id;
  }
  return mt;
}

RenderedChat RenderModelChat(const ModelTemplate& mt, const Json& kwargs,
                             const std::vector<ChatMessage>& messages, const Tokenizer& tok,
                             bool add_generation_prompt, ChatDate date) {
  const jinja::Rendered r = RenderText(*mt.tmpl, messages, tok, add_generation_prompt, date, kwargs);
  const std::vector<Special> specials = FindSpecials(r.text, tok);
  std::vector<Turn> turns(messages.size());
  std::vector<size_t> cuts;
  int last_assistant = -1;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    last_assistant = static_cast<int>(i);
    turns[i] = AssistantTurn(r, specials, static_cast<int>(i), mt.generation_prompt);
    if (!turns[i].found && !messages[i].content.empty()) {
      throw Error(Code::kInvalidArgument,
                  "chat_template: assistant message " + std::to_string(i) +
                      " is not written inside a for loop over the messages, so its turn cannot be told apart",
                  "chat_template");
    }
    cuts.push_back(turns[i].begin);
    cuts.push_back(turns[i].end);
  }
  std::sort(cuts.begin(), cuts.end());
  const Encoded enc = Encode(r.text, specials, tok, cuts);
  RenderedChat out;
  out.ids = enc.ids;
  out.weights.assign(enc.ids.size(), 0.0f);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!turns[i].found) continue;
    const bool last = static_cast<int>(i) == last_assistant;
    bool prompt_set = false;
    for (size_t k = 0; k < enc.ids.size(); ++k) {
      if (enc.starts[k] < turns[i].begin || enc.starts[k] >= turns[i].end) continue;
      out.weights[k] = messages[i].weight;
      if (!last) continue;
      if (!prompt_set) out.prompt_len = k, prompt_set = true;
      out.completion_ids.push_back(enc.ids[k]);
    }
  }
  if (add_generation_prompt) out.prompt_len = out.ids.size();
  return out;
}

}  // namespace burst
