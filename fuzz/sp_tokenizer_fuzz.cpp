// SentencePiece `tokenizer.model` files (protobuf wire format, read by
// Burst's own parser): load from the bytes, then encode and decode sample
// texts. The same input is also encoded as text by a shipped model, since
// prompts reach the tokenizer from API callers.
#include <memory>

#include "fuzz_util.h"
#include "model/sp_tokenizer.h"
#include "tokenizer_check.h"

namespace {

const burst::Tokenizer& ShippedModel() {
  static const std::unique_ptr<burst::Tokenizer> tok =
      burst::LoadSentencePieceTokenizer(BURST_SOURCE_DIR "/tests/fixtures/spm/unigram-nfkc.model");
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace burst;
  const std::string_view bytes = fuzz::Text(data, size);
  if (size <= 4096) fuzz::CheckEncodeDecode(ShippedModel(), bytes);
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = LoadSentencePieceTokenizerFromBytes(bytes, "tokenizer.model");
  } catch (const Error&) {
    return 0;
  }
  try {
    fuzz::CheckTokenizer(*tok);
  } catch (const Error&) {
    // A corrupt table that loading cannot see whole (a charsmap entry) is
    // reported when encoding reaches it.
  }
  return 0;
}
