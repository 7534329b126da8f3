#include "model/sp_model_proto.h"

#include <cstring>

#include "core/status.h"

namespace burst::sp {
namespace {

// ------------------------------------------------------------------------------------------------
// Protobuf wire format: just what ModelProto needs. Every read is bounds
// checked; running off the end means a truncated or corrupt file.

class WireReader {
 public:
  enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

  // `base` is the offset of `data` in the file, for messages.
  WireReader(std::string_view data, size_t base, const std::string& file)
      : data_(data), base_(base), file_(file) {}

  bool Done() const { return pos_ >= data_.size(); }

  // Reads a field key. Groups (wire types 3, 4) are not used by ModelProto and,
  // like the unassigned types 6 and 7, mean the bytes are not a model.
  void Key(uint32_t* field, int* wire) {
    const size_t at = pos_;
    const uint64_t key = Varint();
    *field = static_cast<uint32_t>(key >> 3);
    *wire = static_cast<int>(key & 7);
    if (*field == 0 || key >> 32 != 0 ||
        (*wire != kVarint && *wire != kFixed64 && *wire != kLengthDelimited && *wire != kFixed32)) {
      Fail(at, "invalid field key");
    }
  }

  uint64_t Varint() {
    const size_t at = pos_;
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ >= data_.size()) Fail(at, "truncated varint");
      const auto b = static_cast<unsigned char>(data_[pos_++]);
      value |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (b < 0x80) return value;
    }
    Fail(at, "varint longer than 10 bytes");
  }

  std::string_view Bytes(size_t* offset) {
    const size_t at = pos_;
    const uint64_t size = Varint();
    if (size > data_.size() - pos_) Fail(at, "length-delimited field runs past the end");
    *offset = base_ + pos_;
    std::string_view out = data_.substr(pos_, size);
    pos_ += size;
    return out;
  }

  uint32_t Fixed32() {
    if (data_.size() - pos_ < 4) Fail(pos_, "truncated fixed32");
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(data_[pos_ + i]);
    pos_ += 4;
    return v;
  }

  void Skip(int wire) {
    size_t unused;
    switch (wire) {
      case kVarint:
        Varint();
        break;
      case kFixed64:
        if (data_.size() - pos_ < 8) Fail(pos_, "truncated fixed64");
        pos_ += 8;
        break;
      case kLengthDelimited:
        Bytes(&unused);
        break;
      case kFixed32:
        Fixed32();
        break;
    }
  }

  // A known field with the wrong wire type: the file is not what we think.
  void Expect(int wire, int want, uint32_t field, const char* message) {
    if (wire != want) {
      Fail(pos_, std::string(message) + " field " + std::to_string(field) + " has wire type " +
                     std::to_string(wire));
    }
  }

  [[noreturn]] void Fail(size_t at, const std::string& what) const {
    throw Error(Code::kDataLoss,
                file_ + ": truncated or corrupt SentencePiece model (" + what + " at byte " +
                    std::to_string(base_ + at) + ")",
                file_);
  }

  size_t offset() const { return base_ + pos_; }

 private:
  std::string_view data_;
  size_t pos_ = 0;
  size_t base_;
  const std::string& file_;
};

// Proto2 semantics: a repeated occurrence of a singular field overwrites it,
// and one of an embedded message merges into it; unknown fields are skipped;
// an enum value the schema does not know leaves the field at its default.

void ParsePiece(std::string_view data, size_t base, const std::string& file, PieceProto* p) {
  WireReader r(data, base, file);
  while (!r.Done()) {
    uint32_t field;
    int wire;
    r.Key(&field, &wire);
    size_t off;
    if (field == 1) {
      r.Expect(wire, WireReader::kLengthDelimited, field, "SentencePiece");
      p->piece = std::string(r.Bytes(&off));
    } else if (field == 2) {
      r.Expect(wire, WireReader::kFixed32, field, "SentencePiece");
      const uint32_t bits = r.Fixed32();
      std::memcpy(&p->score, &bits, sizeof(bits));
    } else if (field == 3) {
      r.Expect(wire, WireReader::kVarint, field, "SentencePiece");
      const uint64_t v = r.Varint();
      if (v >= 1 && v <= 6) p->type = static_cast<PieceType>(v);
    } else {
      r.Skip(wire);
    }
  }
}

void ParseTrainerSpec(std::string_view data, size_t base, const std::string& file, TrainerSpecProto* t) {
  WireReader r(data, base, file);
  while (!r.Done()) {
    uint32_t field;
    int wire;
    r.Key(&field, &wire);
    size_t off;
    auto string_field = [&](std::string* out) {
      r.Expect(wire, WireReader::kLengthDelimited, field, "TrainerSpec");
      *out = std::string(r.Bytes(&off));
    };
    auto varint_field = [&]() {
      r.Expect(wire, WireReader::kVarint, field, "TrainerSpec");
      return r.Varint();
    };
    switch (field) {
      case 3: {
        const uint64_t v = varint_field();
        if (v >= 1 && v <= 4) t->model_type = static_cast<int>(v);
        break;
      }
      case 24:
        t->treat_whitespace_as_suffix = varint_field() != 0;
        break;
      case 35:
        t->byte_fallback = varint_field() != 0;
        break;
      case 44:
        t->unk_surface.emplace();
        string_field(&*t->unk_surface);
        break;
      case 45:
        string_field(&t->unk_piece);
        break;
      case 46:
        string_field(&t->bos_piece);
        break;
      case 47:
        string_field(&t->eos_piece);
        break;
      case 48:
        string_field(&t->pad_piece);
        break;
      default:
        r.Skip(wire);
    }
  }
}

void ParseNormalizerSpec(std::string_view data, size_t base, const std::string& file,
                         NormalizerSpecProto* n) {
  WireReader r(data, base, file);
  while (!r.Done()) {
    uint32_t field;
    int wire;
    r.Key(&field, &wire);
    size_t off;
    auto bool_field = [&]() {
      r.Expect(wire, WireReader::kVarint, field, "NormalizerSpec");
      return r.Varint() != 0;
    };
    switch (field) {
      case 1:
        r.Expect(wire, WireReader::kLengthDelimited, field, "NormalizerSpec");
        n->name = std::string(r.Bytes(&off));
        break;
      case 2:
        r.Expect(wire, WireReader::kLengthDelimited, field, "NormalizerSpec");
        n->precompiled_charsmap = std::string(r.Bytes(&off));
        break;
      case 3:
        n->add_dummy_prefix = bool_field();
        break;
      case 4:
        n->remove_extra_whitespaces = bool_field();
        break;
      case 5:
        n->escape_whitespaces = bool_field();
        break;
      default:
        r.Skip(wire);
    }
  }
}

}  // namespace

ModelProto ParseModel(std::string_view data, const std::string& file) {
  ModelProto m;
  WireReader r(data, 0, file);
  while (!r.Done()) {
    uint32_t field;
    int wire;
    r.Key(&field, &wire);
    if (field < 1 || field > 5 || field == 4) {  // 4: self_test_data, unused here
      r.Skip(wire);
      continue;
    }
    r.Expect(wire, WireReader::kLengthDelimited, field, "ModelProto");
    size_t off;
    const std::string_view body = r.Bytes(&off);
    switch (field) {
      case 1:
        ParsePiece(body, off, file, &m.pieces.emplace_back());
        break;
      case 2:
        if (!m.trainer_spec) m.trainer_spec.emplace();
        ParseTrainerSpec(body, off, file, &*m.trainer_spec);
        break;
      case 3:
        if (!m.normalizer_spec) m.normalizer_spec.emplace();
        ParseNormalizerSpec(body, off, file, &*m.normalizer_spec);
        break;
      case 5:
        if (!m.denormalizer_spec) m.denormalizer_spec.emplace();
        ParseNormalizerSpec(body, off, file, &*m.denormalizer_spec);
        break;
    }
  }
  return m;
}

}  // namespace burst::sp
