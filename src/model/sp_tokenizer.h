// SentencePiece `tokenizer.model` tokenizer (Llama 1/2, Mistral, and Burst's
// shipped base model), through the sentencepiece library.
//
// Note: SentencePiece always matches user-defined symbols (such as
// <|im_start|>) in text, so Encode's allow_special=false cannot escape them;
// data loading keeps specials out of user text by rendering templates as
// segments instead.
// Thread-safety: immutable after loading. Errors: throw burst::Error.
#pragma once

#include <filesystem>
#include <memory>

#include "model/tokenizer.h"

namespace burst {

std::unique_ptr<Tokenizer> LoadSentencePieceTokenizer(const std::filesystem::path& model_file);

}  // namespace burst
