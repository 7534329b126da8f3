// Placeholder until the byte-level BPE lands.
#include "model/bpe_tokenizer.h"

#include "core/status.h"

namespace burst {
std::unique_ptr<Tokenizer> LoadBpeTokenizer(const std::filesystem::path& tokenizer_json) {
  throw Error(Code::kUnimplemented, "tokenizer.json is not supported yet", tokenizer_json.string());
}
}  // namespace burst
