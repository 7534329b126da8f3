// SentencePiece's tokenizer.model (a ModelProto in protobuf wire format):
// what sp_tokenizer.cpp needs of it, read with every access bounds-checked.
// Internal to the SentencePiece tokenizer; errors name the file and are
// kInvalidArgument (a truncated or corrupt file).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace burst::sp {

// ModelProto.SentencePiece.Type.
enum class PieceType : uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// TrainerSpec.ModelType.
enum ModelType { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };

struct PieceProto {
  std::string piece;
  float score = 0.0f;
  PieceType type = PieceType::kNormal;
};

struct TrainerSpecProto {
  int model_type = kUnigram;
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  // Empty means the default (<unk>, <s>, </s>, <pad>), as ModelInterface reads them.
  std::string unk_piece, bos_piece, eos_piece, pad_piece;
  std::optional<std::string> unk_surface;
};

struct NormalizerSpecProto {
  std::string name;
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

struct ModelProto {
  std::vector<PieceProto> pieces;
  std::optional<TrainerSpecProto> trainer_spec;
  std::optional<NormalizerSpecProto> normalizer_spec;
  std::optional<NormalizerSpecProto> denormalizer_spec;
};

// Parses a whole tokenizer.model; `file` names it in errors.
ModelProto ParseModel(std::string_view data, const std::string& file);

}  // namespace burst::sp
