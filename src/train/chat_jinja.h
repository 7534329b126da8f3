// A model's own chat_template (Jinja, from its tokenizer files) rendered to
// token ids with loss weights, as transformers' apply_chat_template renders
// the text and its tokenizer splits it.
//
// What Burst adds to the text transformers renders:
//   - Control tokens come only from the template: the bytes of a message
//     are encoded as text even where they spell "<|im_end|>" (Jinja's
//     Text keeps each byte's origin through trim, split, +).
//   - Loss weights follow the rendered turns: the bytes written while the
//     template's `for` walks an assistant message are that message's turn;
//     its trained part starts after the generation prompt (what
//     add_generation_prompt appends, "<|im_start|>assistant\n"; for a
//     template that appends one either way, what it writes before an
//     assistant's content) and ends
//     with the turn's last control token (its end of turn), so a reasoning
//     block the template writes is trained and the newline after
//     <|im_end|> is not.
//   - The date: a training render defines no strftime_now, so Llama 3.1+'s
//     template takes its own default date (reproducible); a serving render
//     gets today's, UTC, as transformers does.
//
// Thread-safety: a ModelTemplate is immutable. Errors: burst::Error
// kInvalidArgument, param "chat_template" for the template, "messages" for
// conversations it refuses (its raise_exception).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "train/jinja.h"

namespace burst {

struct ChatMessage;
struct RenderedChat;
enum class ChatDate;

struct ModelTemplate {
  std::shared_ptr<const jinja::Template> tmpl;
  std::string generation_prompt;  // what add_generation_prompt appends
  int end_of_turn = -1;           // the control token closing an assistant turn
};

// Parses tok.chat_template and learns its generation prompt and end-of-turn
// token by rendering a two-message conversation.
std::shared_ptr<const ModelTemplate> LoadModelTemplate(const Tokenizer& tok);

// `kwargs`: more template variables (ChatTemplate::kwargs).
RenderedChat RenderModelChat(const ModelTemplate& mt, const Json& kwargs,
                             const std::vector<ChatMessage>& messages, const Tokenizer& tok,
                             bool add_generation_prompt, ChatDate date);

}  // namespace burst
