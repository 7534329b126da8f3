#include "model/sp_tokenizer.h"

#include <sentencepiece_processor.h>

#include "core/status.h"

namespace burst {
namespace {

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::filesystem::path& file) {
    auto status = sp_.Load(file.string());
    if (!status.ok()) {
      throw Error(Code::kDataLoss, file.string() + ": cannot load SentencePiece model: " +
                  status.ToString(), file.string());
    }
    kind = "sentencepiece";
    if (sp_.bos_id() >= 0) bos_id = sp_.bos_id();
    if (sp_.eos_id() >= 0) eos_id = sp_.eos_id();
    if (sp_.pad_id() >= 0) pad_id = sp_.pad_id();
  }

  std::vector<int> Encode(std::string_view text, bool /*allow_special*/) const override {
    std::vector<int> ids;
    auto status = sp_.Encode(std::string(text), &ids);
    if (!status.ok()) throw Error(Code::kInternal, "SentencePiece encode: " + status.ToString());
    return ids;
  }

  std::string Decode(const std::vector<int>& ids, bool skip_special) const override {
    std::vector<int> keep;
    keep.reserve(ids.size());
    for (int id : ids) {
      if (id < 0 || id >= vocab_size()) continue;
      if (skip_special && IsSpecial(id)) continue;
      keep.push_back(id);
    }
    std::string text;
    // SentencePiece drops control tokens when decoding; spell them out when asked to keep them.
    if (!skip_special) {
      std::vector<int> run;
      for (int id : keep) {
        if (sp_.IsControl(id)) {  // user-defined symbols decode as their text already
          text += DecodeRun(run) + sp_.IdToPiece(id);
          run.clear();
        } else {
          run.push_back(id);
        }
      }
      return text + DecodeRun(run);
    }
    return DecodeRun(keep);
  }

  std::string IdToPiece(int id) const override { return sp_.IdToPiece(id); }

  std::optional<int> PieceToId(std::string_view piece) const override {
    int id = sp_.PieceToId(std::string(piece));
    if (id == sp_.unk_id() && piece != sp_.IdToPiece(sp_.unk_id())) return std::nullopt;
    return id;
  }

  int vocab_size() const override { return sp_.GetPieceSize(); }

  bool IsSpecial(int id) const override {
    return sp_.IsControl(id) || sp_.IsUnknown(id) || added_special_ids.count(id) > 0;
  }

 private:
  std::string DecodeRun(const std::vector<int>& ids) const {
    if (ids.empty()) return "";
    std::string out;
    sp_.Decode(ids, &out);
    return out;
  }
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::unique_ptr<Tokenizer> LoadSentencePieceTokenizer(const std::filesystem::path& model_file) {
  return std::make_unique<SentencePieceTokenizer>(model_file);
}

}  // namespace burst
