// Chat templates: OpenAI-style messages rendered to token ids with a loss
// weight per token, as the model's own chat format lays them out.
//
// `model` renders the model's own chat_template (Jinja, chat_jinja.h);
// `llama3` and `chatml` are written out here for models without one;
// `auto` is `model` when the tokenizer has a chat_template, else picks
// llama3 or chatml by its special tokens, and keeps the written-out ones
// for a SentencePiece tokenizer whose template is ChatML or Llama 3 (what
// such a model, Burst's burst-small, was trained on: each piece of a turn
// encoded on its own). Either way text in a message can never turn into a
// control token.
//
// Thread-safety: stateless. Errors: throw burst::Error.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "model/tokenizer.h"

namespace burst {

struct ModelTemplate;

enum class ChatTemplateKind { kLlama3, kChatML, kModel };

struct ChatTemplate {
  ChatTemplateKind kind = ChatTemplateKind::kChatML;
  std::shared_ptr<const ModelTemplate> model;  // kModel: the parsed template
  Json kwargs = Json::object();                // kModel: more variables (CheckTemplateKwargs)
};

// Template variables from outside ({"enable_thinking": false}): an object
// of at most 32 keys naming no variable the renderer sets (messages,
// add_generation_prompt, bos_token, ...). Throws kInvalidArgument, `param`.
void CheckTemplateKwargs(const Json& kwargs, const std::string& param);

// Throws kInvalidArgument (param "template") for an unknown name and
// (param "chat_template") for a model template Burst cannot render,
// naming its line and construct.
ChatTemplate ResolveChatTemplate(const std::string& name, const Tokenizer& tokenizer,
                                 const Json& kwargs = Json::object());
const char* ChatTemplateName(const ChatTemplate& t);

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

// What a model's own chat_template (its text, tokenizer_config.json) adds to
// the plain Llama 3 / ChatML layout when `llama3` or `chatml` is asked for, so training renders what serving
// stacks render with that template (checked against Jinja2, as transformers runs it, on the real templates in
// chat_template_test):
//   - trim: Llama 3's templates trim each message's content;
//   - knowledge_date, date: Llama 3.1+ always open with a system turn,
//     "Cutting Knowledge Date: ...\nToday Date: ...\n\n" then the system
//     message (trimmed). Serving stacks write today's date there (their
//     strftime_now); training data takes the template's own default
//     (date_string, "26 Jul 2024"), so a run renders its data the same on
//     any day and a resumed run trains on the same tokens (ChatDate);
//   - default_system: a ChatML template's system turn when the messages
//     have none (Qwen 2.5's "You are Qwen, created by Alibaba Cloud. ...");
//   - think: Qwen 3's reasoning blocks. An assistant turn after the last
//     user message opens with "<think>\nREASONING\n</think>\n\n" (empty
//     when it is the conversation's last message and has none); earlier
//     turns drop theirs. REASONING is what the content holds between
//     <think> and </think>.
struct ChatTemplateExtras {
  bool trim = false;
  std::string knowledge_date, date;
  std::string default_system;
  bool think = false;
};
ChatTemplateExtras ReadChatTemplateExtras(ChatTemplateKind kind, const std::string& text);

// Which date a Llama 3.1+ system turn carries: the template's default
// (training data) or today's, UTC, as "%d %b %Y" (sampling, as serving stacks).
enum class ChatDate { kTemplateDefault, kToday };

// Renders the messages `in` (with the extras of the chat_template of `tok`);
// with add_generation_prompt, ends with an open assistant header (for
// sampling) instead of expecting a final assistant message.
RenderedChat RenderChat(const std::vector<ChatMessage>& in, const ChatTemplate& tmpl, const Tokenizer& tok,
                        bool add_generation_prompt, ChatDate date = ChatDate::kTemplateDefault);

// The token that closes an assistant turn in this template.
int EndOfTurnId(const ChatTemplate& tmpl, const Tokenizer& tokenizer);

}  // namespace burst
