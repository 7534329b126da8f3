// BpeTokenizer: Hugging Face `tokenizer.json` byte-level BPE (GPT-2, Llama 3,
// Qwen), implemented in Burst (no packaged library exists).
//
// Owns the vocabulary, merge ranks, added tokens and the pre-tokenizer
// regexes (compiled with PCRE2, which has \p{L} classes and lookahead).
// Thread-safety: immutable after FromFile; Encode/Decode are const and safe
// to call concurrently.
// Errors: FromFile throws burst::Error naming the file and the unsupported
// or malformed field.
#pragma once

#include <filesystem>
#include <memory>

#include "model/tokenizer.h"

namespace burst {

class BpeTokenizer;
std::unique_ptr<Tokenizer> LoadBpeTokenizer(const std::filesystem::path& tokenizer_json);

}  // namespace burst
