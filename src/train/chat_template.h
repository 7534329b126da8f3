// Chat templates: OpenAI-style messages rendered to token ids with a loss
// weight per token, as the model's own chat format lays them out.
//
// Llama 3 and ChatML are written out here rather than run through Jinja;
// `auto` picks one from the tokenizer (its chat_template text, else its
// special tokens). Special tokens are looked up by id and text segments are
// encoded separately, so text in a message can never turn into a control
// token.
//
// Thread-safety: stateless. Errors: throw burst::Error.
#pragma once

#include <string>
#include <vector>

#include "model/tokenizer.h"

namespace burst {

enum class ChatTemplate { kLlama3, kChatML };

ChatTemplate ResolveChatTemplate(const std::string& name, const Tokenizer& tokenizer);
const char* ChatTemplateName(ChatTemplate t);

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
  float weight = 1.0f;  // assistant messages only: 0 = not trained on
};

struct RenderedChat {
  std::vector<int> ids;
  // weights[t] is the loss weight of predicting ids[t] (from position t-1).
  std::vector<float> weights;
  // Tokens before the last assistant message's content: the prompt a
  // sampler continues from (with the assistant header), for exact match.
  size_t prompt_len = 0;
  // That assistant message's content plus its end-of-turn token(s).
  std::vector<int> completion_ids;
};

// Renders messages; with add_generation_prompt, ends with an open assistant
// header (for sampling) instead of expecting a final assistant message.
RenderedChat RenderChat(const std::vector<ChatMessage>& messages, ChatTemplate tmpl,
                        const Tokenizer& tokenizer, bool add_generation_prompt);

// The token that closes an assistant turn in this template.
int EndOfTurnId(ChatTemplate tmpl, const Tokenizer& tokenizer);

}  // namespace burst
