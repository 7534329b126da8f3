// Hugging Face `tokenizer.json` files (byte-level BPE, PCRE2 pre-tokenizer
// regexes from the file): load from the text, then encode and decode sample
// texts. The same input is also encoded as text by the fixture tokenizer,
// whose byte-level encoding must give the bytes back exactly.
#include <memory>

#include "fuzz_util.h"
#include "model/bpe_tokenizer.h"
#include "tokenizer_check.h"

namespace {

const burst::Tokenizer& FixtureTokenizer() {
  static const std::unique_ptr<burst::Tokenizer> tok =
      burst::LoadBpeTokenizer(BURST_SOURCE_DIR "/tests/fixtures/tiny-bpe/tokenizer.json");
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace burst;
  const std::string_view bytes = fuzz::Text(data, size);
  if (size <= 4096) {
    const Tokenizer& fixture = FixtureTokenizer();
    fuzz::CheckEncodeDecode(fixture, bytes);
    fuzz::Expect(fixture.Decode(fixture.Encode(bytes)) == bytes,
                 "byte-level BPE does not give the text back");
  }
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = LoadBpeTokenizerFromBytes(bytes, "tokenizer.json");
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
