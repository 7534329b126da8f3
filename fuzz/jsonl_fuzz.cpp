// Uploaded JSONL training files: CheckDataBytes (what an upload is checked
// against), then the loaders that tokenize and render chats with the
// fixture tokenizer, short max_seq_len so truncation is exercised.
#include <memory>

#include "fuzz_util.h"
#include "train/data.h"

namespace {

const burst::Tokenizer& FixtureTokenizer() {
  static const std::unique_ptr<burst::Tokenizer> tok =
      burst::LoadTokenizer(BURST_SOURCE_DIR "/tests/fixtures/tiny-bpe");
  return *tok;
}

void CheckIds(const std::vector<int>& ids, int vocab) {
  for (int id : ids) burst::fuzz::Expect(id >= 0 && id < vocab, "token id outside the vocabulary");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace burst;
  const std::string bytes(fuzz::Text(data, size));
  DataFileCheck check;
  try {
    check = CheckDataBytes(bytes, "up.jsonl");
  } catch (const Error&) {
    return 0;
  }
  fuzz::Expect(check.examples > 0, "an accepted file has no examples");
  const Tokenizer& tok = FixtureTokenizer();
  DataOptions opt;
  opt.max_seq_len = 24;
  opt.truncate = size % 2 == 0;
  try {
    if (check.preference) {
      Dataset ds = LoadPreferencesBytes(bytes, "up.jsonl", tok, opt);
      for (const auto& p : ds.pairs) {
        CheckIds(p.prompt_ids, tok.vocab_size());
        CheckIds(p.chosen_ids, tok.vocab_size());
        CheckIds(p.rejected_ids, tok.vocab_size());
      }
    } else {
      Dataset ds = LoadSupervisedBytes(bytes, "up.jsonl", tok, opt);
      for (const auto& ex : ds.examples) {
        fuzz::Expect(ex.ids.size() == ex.weights.size(), "one weight per token");
        fuzz::Expect(static_cast<int64_t>(ex.ids.size()) <= opt.max_seq_len, "longer than max_seq_len");
        CheckIds(ex.ids, tok.vocab_size());
        CheckIds(ex.prompt_ids, tok.vocab_size());
        CheckIds(ex.completion_ids, tok.vocab_size());
      }
    }
  } catch (const Error&) {
    // Refusals that need a tokenizer (too long without truncate, nothing
    // left to train on) are errors, not crashes.
  }
  return 0;
}
