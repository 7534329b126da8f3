// SentencePiece `tokenizer.model` tokenizer (Llama 1/2, Mistral, and Burst's
// shipped base model), implemented in Burst without libsentencepiece or
// libprotobuf: Debian's libsentencepiece embeds protobuf 3.14, which crashes
// at start-up next to the protobuf 3.21 that libtorch loads.
//
// Owns the parsed ModelProto (pieces, scores, types, the trainer and
// normalizer options that encoding needs) and the lookup structures built
// from it. It reproduces sentencepiece 0.1.97's SentencePieceProcessor:
//   Encode: normalizer (precompiled charsmap, remove_extra_whitespaces,
//           escape_whitespaces to U+2581, add_dummy_prefix or its suffix form
//           with treat_whitespace_as_suffix; invalid UTF-8 bytes become
//           U+FFFD) -> model (BPE: bpe_model.cc's greedy highest-score merges,
//           UNUSED pieces re-split; UNIGRAM: unigram_model.cc's optimised
//           Viterbi, unknown characters at min score - 10) -> unknown pieces
//           become <0xXX> byte pieces with byte_fallback, else one unk id per
//           run of unknown characters.
//   Decode: sentencepiece's decoding of each run of ids between control ids
//           (byte pieces joined into UTF-8 with U+FFFD for invalid bytes,
//           U+2581 -> space, the leading space of the text dropped when
//           add_dummy_prefix / remove_extra_whitespaces, unk -> unk_surface,
//           " ⁇ " by default); control ids are spelled as their piece
//           ("<s>") unless skip_special drops them.
// User-defined symbols (USER_DEFINED pieces such as <|im_start|>) are always
// matched atomically (longest match) in the text, as SentencePiece does, so
// Encode's allow_special=false cannot escape them; data loading keeps
// specials out of user text by rendering templates as segments instead.
// IsSpecial: CONTROL, UNKNOWN and USER_DEFINED pieces and added_special_ids.
// Beware that a model declaring ordinary text (say "\n") user-defined loses it
// in Decode(..., skip_special=true).
//
// Unsupported (kUnimplemented at load): model types WORD and CHAR, and a
// denormalizer_spec with a precompiled charsmap. Sampling (BPE dropout,
// unigram sampling), n-best and self-test data are not used by Burst.
//
// Thread-safety: immutable after loading; Encode/Decode are const and may be
// called from several threads.
// Errors: LoadSentencePieceTokenizer throws burst::Error with the file path as
// param: kNotFound for a missing file, kDataLoss for a truncated or corrupt
// file or an inconsistent model (no unk piece, duplicate pieces, missing byte
// pieces with byte_fallback...), kUnimplemented as above; messages name the
// file and what is wrong.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "model/tokenizer.h"

namespace burst {

// Loads a SentencePiece model. kind = "sentencepiece"; bos_id/eos_id/pad_id
// are set when the model's bos/eos/pad piece (trainer_spec, default <s>, </s>,
// <pad>) is a CONTROL piece, as sentencepiece's bos_id() etc. report them.
std::unique_ptr<Tokenizer> LoadSentencePieceTokenizer(const std::filesystem::path& model_file);
// The same from the file's bytes; `name` stands for the file in errors.
std::unique_ptr<Tokenizer> LoadSentencePieceTokenizerFromBytes(std::string_view data,
                                                               const std::string& name);

}  // namespace burst
