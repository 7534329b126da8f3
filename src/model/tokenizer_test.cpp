// tokenizer_config.json applied to a loaded tokenizer: what it sets, and that
// wrong types are errors naming the field instead of JSON library or
// std::stoi exceptions escaping the loader.
#include "model/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/fs.h"
#include "core/status.h"
#include "model/bpe_tokenizer.h"

namespace burst {
namespace {

std::unique_ptr<Tokenizer> Fixture() {
  return LoadBpeTokenizer(fs::path(BURST_SOURCE_DIR) / "tests/fixtures/tiny-bpe/tokenizer.json");
}

TEST(TokenizerConfig, SetsSpecialIdsAndTemplate) {
  auto tok = Fixture();
  ApplyTokenizerConfig(*tok, R"({"bos_token": null, "eos_token": {"content": "<|im_end|>"},
      "pad_token": "<|endoftext|>", "chat_template": "{{ x }}",
      "added_tokens_decoder": {"277": {"special": true}, "278": {"special": false}, "99999": {"special": true}}})",
                       "tokenizer_config.json");
  EXPECT_FALSE(tok->bos_id);
  EXPECT_EQ(tok->eos_id, tok->PieceToId("<|im_end|>"));
  EXPECT_EQ(tok->pad_id, tok->PieceToId("<|endoftext|>"));
  EXPECT_EQ(tok->chat_template, "{{ x }}");
  // 99999 lies beyond this vocabulary: it can never be produced, so it is skipped.
  EXPECT_EQ(tok->added_special_ids, (std::set<int>{277}));
}

TEST(TokenizerConfig, ChatTemplateFromAListOrItsOwnFile) {
  auto tok = Fixture();
  ApplyTokenizerConfig(*tok, R"({"chat_template": [{"name": "tool_use", "template": "T"},
      {"name": "default", "template": "D"}]})",
                       "tokenizer_config.json");
  EXPECT_EQ(tok->chat_template, "D");
  // chat_template.jinja beside the config wins, as transformers reads it.
  const fs::path dir = fs::temp_directory_path() / ("burst-tok-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy(fs::path(BURST_SOURCE_DIR) / "tests/fixtures/tiny-bpe", dir, fs::copy_options::recursive);
  WriteFileAtomic(dir / "chat_template.jinja", "{{ 'own file' }}");
  EXPECT_EQ(LoadTokenizer(dir)->chat_template, "{{ 'own file' }}");
  fs::remove_all(dir);
}

TEST(TokenizerConfig, WrongTypesNameTheField) {
  struct Case {
    std::string text, field;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"eos_token": {"content": 5}})", "eos_token"},
           {R"({"bos_token": 7})", "bos_token"},
           {R"({"eos_token": "<|no such token|>"})", "eos_token"},
           {R"({"added_tokens_decoder": {"12abc": {"special": true}}})", "added_tokens_decoder.12abc"},
           {R"({"added_tokens_decoder": {"99999999999": {}}})", "added_tokens_decoder.99999999999"},
           {R"({"added_tokens_decoder": {"-1": {}}})", "added_tokens_decoder.-1"},
           {R"({"added_tokens_decoder": {"3": {"special": "yes"}}})", "added_tokens_decoder.3"},
           {R"({"added_tokens_decoder": {"3": []}})", "added_tokens_decoder.3"},
           {R"({"chat_template": 5})", "chat_template"},
           {R"({"chat_template": [{"name": "default"}]})", "chat_template"},
       }) {
    SCOPED_TRACE(c.text);
    auto tok = Fixture();
    try {
      ApplyTokenizerConfig(*tok, c.text, "cfg.json");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
      EXPECT_EQ(e.status().param(), c.field);
      EXPECT_NE(std::string(e.what()).find("cfg.json"), std::string::npos) << e.what();
    }
  }
  auto tok = Fixture();
  EXPECT_THROW(ApplyTokenizerConfig(*tok, "[1]", "cfg.json"), Error);
  EXPECT_THROW(ApplyTokenizerConfig(*tok, "{\"a\": 1e999}", "cfg.json"), Error);
}

}  // namespace
}  // namespace burst
