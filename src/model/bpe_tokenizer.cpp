// Byte-level BPE over a Hugging Face tokenizer.json; see bpe_tokenizer.h for
// what is supported and why. The pipeline mirrors Hugging Face's Rust crate:
//   text -> added-token split (allow_special) -> normalizer (NFC: identity)
//        -> pre-tokenizer steps (Split..., ByteLevel) -> BPE per piece -> ids.
#include "model/bpe_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"

namespace burst {
namespace {

// The regex ByteLevel applies when use_regex is true (GPT-2's).
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Ids from 2^24 up are a corrupt file, not a vocabulary (and would make the
// id-indexed tables huge).
constexpr long long kMaxId = 1 << 24;

// GPT-2's byte-to-unicode map: printable Latin-1 bytes stand for themselves and
// the other 68 bytes for U+0100.. in byte order, so that every byte of text is
// a visible character in vocab and merges (space is "Ġ", newline "Ċ").
struct ByteLevelTables {
  std::array<std::string, 256> byte_to_utf8;
  std::array<int, 324> cp_to_byte;  // -1 where a code point stands for no byte
  ByteLevelTables() {
    cp_to_byte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const int cp = printable ? b : next++;
      cp_to_byte[cp] = b;
      byte_to_utf8[b] =
          cp < 0x80 ? std::string(1, static_cast<char>(cp))
                    : std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
  }
  // Undoes the map on a vocabulary piece; nullopt when a character is not a
  // byte character (all of those are below U+0800, so one or two bytes long).
  std::optional<std::string> ToBytes(std::string_view piece) const {
    std::string bytes;
    for (size_t i = 0; i < piece.size(); ++i) {
      int cp = static_cast<unsigned char>(piece[i]);
      if (cp >= 0x80) {  // only two-byte sequences can be byte characters
        if ((cp & 0xE0) != 0xC0 || i + 1 == piece.size()) return std::nullopt;
        cp = ((cp & 0x1F) << 6) | (static_cast<unsigned char>(piece[++i]) & 0x3F);
      }
      if (cp >= static_cast<int>(cp_to_byte.size()) || cp_to_byte[cp] < 0) return std::nullopt;
      bytes.push_back(static_cast<char>(cp_to_byte[cp]));
    }
    return bytes;
  }
};
const ByteLevelTables& Tables() {
  static const ByteLevelTables tables;
  return tables;
}

bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool IsWordByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || u == '_' || std::isalnum(u);
}

std::string PcreMessage(int code) {
  PCRE2_UCHAR msg[256];
  pcre2_get_error_message(code, msg, sizeof(msg));
  return reinterpret_cast<char*>(msg);
}

// Per-thread PCRE2 match scratch, so one compiled regex serves all threads. The
// JIT stack may grow to 16 MiB: long whitespace runs under \s+(?!\S) recurse.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
  MatchScratch() {
    if (stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

// Oniguruma's \s (Unicode's White_Space), which Hugging Face's tokenizers
// compile the patterns with; PCRE2's \s also takes U+180E, which Unicode
// 6.3 moved out of White_Space (src/model/bpe_onig_test.cpp finds no other
// difference over all of Unicode).
constexpr char kOnigSpace[] =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// `pattern` with \s written out as Oniguruma's class, and \S outside a
// class as its complement (\S inside a class is kept: none of the real
// patterns has one).
std::string OnigurumaSpaces(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char n = pattern[++i];
      if (n == 's') {
        out += in_class ? std::string(kOnigSpace) : "[" + std::string(kOnigSpace) + "]";
      } else if (n == 'S' && !in_class) {
        out += "[^" + std::string(kOnigSpace) + "]";
      } else {
        out += c;
        out += n;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' first in the class (after an optional '^') is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);  // a POSIX class, [:alpha:]
      if (end != std::string::npos) {
        out.append(pattern, i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

// A compiled pre-tokenizer pattern.
class Regex {
 public:
  // `literal` matches a Split {"String": ...} pattern verbatim. Errors name
  // `where` (the file) and `field`.
  Regex(const std::string& pattern, bool literal, const std::string& where, const std::string& field) {
    // PCRE2_LITERAL excludes MATCH_INVALID_UTF, so literals are escaped instead.
    std::string source = literal ? std::string() : OnigurumaSpaces(pattern);
    for (size_t i = 0; literal && i < pattern.size(); ++i) {
      const auto u = static_cast<unsigned char>(pattern[i]);
      if (u < 0x80 && !std::isalnum(u)) source.push_back('\\');
      source.push_back(pattern[i]);
    }
    int err = 0;
    PCRE2_SIZE offset = 0;
    // MATCH_INVALID_UTF: stray invalid bytes in the text never match instead of
    // failing the whole Encode (Hugging Face only sees valid UTF-8 anyway).
    code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr));
    if (code_ == nullptr) {
      throw Error(Code::kUnimplemented,
                  where + ": " + field + " does not compile with PCRE2 at offset " + std::to_string(offset) +
                      ": " + PcreMessage(err),
                  where);
    }
    pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE);  // else PCRE2 interprets
  }

  // Appends the [begin, end) of every non-empty, non-overlapping match.
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>* out) const {
    thread_local MatchScratch scratch;
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    for (size_t pos = 0; pos < text.size();) {
      const int rc = pcre2_match(code_.get(), subject, text.size(), pos, 0, scratch.data, scratch.context);
      if (rc == PCRE2_ERROR_NOMATCH) return;
      if (rc < 0) throw Error(Code::kInternal, "pre-tokenizer regex failed: " + PcreMessage(rc));
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
      if (ov[1] > ov[0]) {
        out->emplace_back(ov[0], ov[1]);
        pos = ov[1];
      } else {  // empty match: step over one character
        for (pos = ov[1] + 1; pos < text.size() && (text[pos] & 0xC0) == 0x80;) ++pos;
      }
    }
  }

 private:
  std::unique_ptr<pcre2_code, decltype(&pcre2_code_free)> code_{nullptr, &pcre2_code_free};
};

// Split behaviors, in the order of kBehaviorNames.
enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
constexpr const char* kBehaviorNames[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                          "Contiguous"};

// One pre-tokenizer step: a Split, or ByteLevel (prefix space, then GPT-2's
// regex with Isolated when use_regex). ByteLevel's byte-to-unicode mapping
// happens in the BPE step, on bytes.
struct PreStep {
  std::shared_ptr<const Regex> regex;  // null: no splitting
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;
};

struct AddedToken {
  int id = 0;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, single_word = false;
};

// Scratch reused across the pieces of one Encode call.
struct EncodeScratch {
  struct Symbol {
    int id, prev, next;
    bool alive;
  };
  struct Candidate {  // a pair that a merge applies to, at symbols[pos] and its next
    int rank, pos, new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<std::string_view> pieces, next_pieces;
  std::deque<std::string> arena;  // pieces that gained a prefix space
  std::vector<std::pair<size_t, size_t>> matches, kept;
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::string mapped;
};

// Splits `piece` at the matches of step.regex and groups the parts by
// step.behavior, exactly as Hugging Face's NormalizedString::split.
void SplitPiece(const PreStep& step, std::string_view piece, EncodeScratch* s) {
  s->matches.clear();
  step.regex->FindAll(piece, &s->matches);
  struct Part {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Part> parts;
  size_t prev = 0;
  for (const auto& [b, e] : s->matches) {
    if (b > prev) parts.push_back({prev, b, step.invert});
    parts.push_back({b, e, !step.invert});
    prev = e;
  }
  if (prev < piece.size()) parts.push_back({prev, piece.size(), step.invert});
  const bool backwards = step.behavior == Behavior::kMergedWithNext;
  if (backwards) std::reverse(parts.begin(), parts.end());
  auto& kept = s->kept;
  kept.clear();
  bool previous_match = false;
  for (const Part& part : parts) {
    const bool merge_into_neighbour =
        !kept.empty() && (step.behavior == Behavior::kContiguous
                              ? part.is_match == previous_match
                              : (backwards || step.behavior == Behavior::kMergedWithPrevious) &&
                                    part.is_match && !previous_match);
    if (step.behavior == Behavior::kRemoved && part.is_match) {
      // dropped
    } else if (merge_into_neighbour) {
      (backwards ? kept.back().first : kept.back().second) = backwards ? part.begin : part.end;
    } else {
      kept.emplace_back(part.begin, part.end);
    }
    previous_match = part.is_match;
  }
  if (backwards) std::reverse(kept.begin(), kept.end());
  for (const auto& [b, e] : kept) s->next_pieces.push_back(piece.substr(b, e - b));
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

}  // namespace

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(const Json& root, const std::string& where);

  std::vector<int> Encode(std::string_view text, bool allow_special) const override;
  std::vector<std::pair<std::string, int>> SpecialTexts() const override {
    std::vector<std::pair<std::string, int>> out;
    for (const AddedToken& t : added_)
      if (t.special) out.emplace_back(t.content, t.id);
    return out;
  }
  std::string Decode(const std::vector<int>& ids, bool skip_special) const override;
  std::string IdToPiece(int id) const override {
    return id >= 0 && id < vocab_size_ ? id_to_piece_[id] : std::string();
  }
  std::optional<int> PieceToId(std::string_view piece) const override;
  int vocab_size() const override { return vocab_size_; }
  bool IsSpecial(int id) const override {
    return id >= 0 && id < vocab_size_ && added_index_[id] >= 0 && added_[added_index_[id]].special;
  }
  std::vector<std::string> PreTokenized(std::string_view text) const;

 private:
  struct Merge {
    int rank, new_id;
  };
  static uint64_t PairKey(int a, int b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  [[noreturn]] void Fail(Code code, const std::string& what) const {
    throw Error(code, where_ + ": " + what, where_);
  }
  // obj[key], or nullptr when absent or null.
  static const Json* Field(const Json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  // obj[key], which must be present and satisfy `is` (described as `what`).
  const Json& Require(const Json& obj, const char* key, const std::string& field,
                      bool (Json::*is)() const noexcept, const char* what) const;
  std::string TypeOf(const Json& obj, const std::string& field) const;
  bool BoolField(const Json& obj, const char* key, bool def, const std::string& field) const;
  void LoadModel(const Json& model);
  void LoadNormalizer(const Json& normalizer, const std::string& field);
  void LoadPreTokenizer(const Json& pre, const std::string& field);
  void LoadAddedTokens(const Json& added);
  void EncodeSection(std::string_view section, EncodeScratch* s, std::vector<int>* ids) const;
  // The pre-tokenizer's pieces of one section (in s->pieces).
  void PreTokenize(std::string_view section, EncodeScratch* s) const;
  void EncodePiece(std::string_view piece, EncodeScratch* s, std::vector<int>* ids) const;

  std::string where_;  // the file, for errors
  std::unordered_map<std::string, int, StringHash, std::equal_to<>> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int, 256> byte_ids_{};  // vocab id of each byte's character, -1 if absent
  int unk_id_ = -1;
  bool ignore_merges_ = false;
  std::vector<PreStep> steps_;
  bool saw_byte_level_ = false;
  bool nfc_ = false;          // the normalizer composes (NFC) each section first
  bool plain_added_ = false;  // some added token is not special (matched even without allow_special)
  std::vector<AddedToken> added_;
  std::array<std::vector<int>, 256> added_by_first_byte_;  // into added_, longest first
  int vocab_size_ = 0;
  std::vector<std::string> id_to_piece_;
  std::vector<std::string> id_to_bytes_;  // vocab pieces with the byte-level mapping undone
  std::vector<int> added_index_;          // per id: index into added_, or -1
};

const Json& BpeTokenizer::Require(const Json& obj, const char* key, const std::string& field,
                                  bool (Json::*is)() const noexcept, const char* what) const {
  const Json* v = Field(obj, key);
  if (v == nullptr) Fail(Code::kInvalidArgument, field + "." + key + " is missing");
  if (!((*v).*is)()) Fail(Code::kInvalidArgument, field + "." + key + " must be " + what);
  return *v;
}

std::string BpeTokenizer::TypeOf(const Json& obj, const std::string& field) const {
  if (!obj.is_object()) Fail(Code::kInvalidArgument, field + " must be an object");
  return Require(obj, "type", field, &Json::is_string, "a string").get<std::string>();
}

bool BpeTokenizer::BoolField(const Json& obj, const char* key, bool def, const std::string& field) const {
  return Field(obj, key) ? Require(obj, key, field, &Json::is_boolean, "a bool").get<bool>() : def;
}

BpeTokenizer::BpeTokenizer(const Json& root, const std::string& where) : where_(where) {
  kind = "bpe";
  if (!root.is_object()) Fail(Code::kInvalidArgument, "top level must be a JSON object");
  const Json* model = Field(root, "model");
  if (model == nullptr) Fail(Code::kInvalidArgument, "model is missing");
  LoadModel(*model);
  if (const Json* normalizer = Field(root, "normalizer")) LoadNormalizer(*normalizer, "normalizer");
  const Json* pre = Field(root, "pre_tokenizer");
  if (pre == nullptr) Fail(Code::kUnimplemented, "pre_tokenizer null (needs ByteLevel)");
  LoadPreTokenizer(*pre, "pre_tokenizer");
  if (!saw_byte_level_) Fail(Code::kUnimplemented, "pre_tokenizer without ByteLevel");
  const Json* decoder = Field(root, "decoder");
  const std::string decoder_type = decoder ? TypeOf(*decoder, "decoder") : "null";
  if (decoder_type != "ByteLevel") {
    Fail(Code::kUnimplemented, "decoder.type " + decoder_type + " (only ByteLevel)");
  }
  if (const Json* added = Field(root, "added_tokens")) LoadAddedTokens(*added);

  id_to_piece_.resize(vocab_size_);
  id_to_bytes_.resize(vocab_size_);
  added_index_.assign(vocab_size_, -1);
  for (const auto& [piece, id] : vocab_) {
    id_to_piece_[id] = piece;
    // As Hugging Face's ByteLevel decoder: a piece with a character outside
    // the byte map decodes to its own UTF-8.
    id_to_bytes_[id] = Tables().ToBytes(piece).value_or(piece);
  }
  for (size_t i = 0; i < added_.size(); ++i) {
    id_to_piece_[added_[i].id] = added_[i].content;
    added_index_[added_[i].id] = static_cast<int>(i);
  }
}

void BpeTokenizer::LoadModel(const Json& model) {
  if (!model.is_object()) Fail(Code::kInvalidArgument, "model must be an object");
  const Json* type = Field(model, "type");  // Hugging Face infers BPE when absent
  const std::string type_name = type && type->is_string() ? type->get<std::string>() : "BPE";
  if (type_name != "BPE") Fail(Code::kUnimplemented, "model.type " + type_name + " (only BPE)");
  if (BoolField(model, "byte_fallback", false, "model")) {
    Fail(Code::kUnimplemented, "model.byte_fallback true (SentencePiece-style BPE)");
  }
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* v = Field(model, key);
    if (v != nullptr && *v != Json(0) && *v != Json(0.0) && *v != Json("")) {
      Fail(Code::kUnimplemented, std::string("model.") + key + " " + v->dump());
    }
  }
  ignore_merges_ = BoolField(model, "ignore_merges", false, "model");

  const Json& vocab = Require(model, "vocab", "model", &Json::is_object, "an object");
  vocab_.reserve(vocab.size());
  for (const auto& [piece, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= kMaxId) {
      Fail(Code::kInvalidArgument, "model.vocab[" + Json(piece).dump() + "] must be an id < 2^24");
    }
    vocab_[piece] = id.get<int>();
    vocab_size_ = std::max(vocab_size_, id.get<int>() + 1);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(Tables().byte_to_utf8[b]);
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  if (const Json* unk = Field(model, "unk_token"); unk != nullptr && unk->is_string()) {
    auto it = vocab_.find(unk->get<std::string>());
    if (it != vocab_.end()) unk_id_ = it->second;
  }

  const Json& merges = Require(model, "merges", "model", &Json::is_array, "an array");
  merges_.reserve(merges.size());
  std::string merged;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Json& m = merges[rank];
    const auto field = [rank] { return "model.merges[" + std::to_string(rank) + "]"; };
    std::string_view left, right;
    if (m.is_string()) {  // "left right"; byte-level tokens never hold a space
      const std::string_view s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == s.npos || s.find(' ', space + 1) != s.npos) {
        Fail(Code::kInvalidArgument, field() + " must be \"left right\"");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get_ref<const std::string&>();
      right = m[1].get_ref<const std::string&>();
    } else {
      Fail(Code::kInvalidArgument, field() + " must be a string or two strings");
    }
    merged.assign(left).append(right);
    auto l = vocab_.find(left), r = vocab_.find(right), n = vocab_.find(merged);
    if (l == vocab_.end() || r == vocab_.end() || n == vocab_.end()) {
      Fail(Code::kInvalidArgument, field() + " has a token missing from model.vocab");
    }
    // Later duplicates win, as in Hugging Face's merge map.
    merges_[PairKey(l->second, r->second)] = Merge{static_cast<int>(rank), n->second};
  }
}

void BpeTokenizer::LoadNormalizer(const Json& normalizer, const std::string& field) {
  const std::string type = TypeOf(normalizer, field);
  if (type == "NFC") {
    nfc_ = true;
    return;
  }
  if (type != "Sequence") Fail(Code::kUnimplemented, field + ".type " + type + " (only NFC)");
  const Json& list = Require(normalizer, "normalizers", field, &Json::is_array, "an array");
  for (size_t i = 0; i < list.size(); ++i) {
    LoadNormalizer(list[i], field + ".normalizers[" + std::to_string(i) + "]");
  }
}

void BpeTokenizer::LoadPreTokenizer(const Json& pre, const std::string& field) {
  const std::string type = TypeOf(pre, field);
  if (saw_byte_level_) Fail(Code::kUnimplemented, field + ".type " + type + " after ByteLevel");
  PreStep step;
  if (type == "Sequence") {
    const Json& list = Require(pre, "pretokenizers", field, &Json::is_array, "an array");
    for (size_t i = 0; i < list.size(); ++i) {
      LoadPreTokenizer(list[i], field + ".pretokenizers[" + std::to_string(i) + "]");
    }
    return;
  } else if (type == "ByteLevel") {
    saw_byte_level_ = true;
    step.add_prefix_space = BoolField(pre, "add_prefix_space", false, field);
    if (BoolField(pre, "use_regex", true, field)) {
      step.regex = std::make_shared<Regex>(kGpt2Pattern, false, where_, field);
    }
  } else if (type == "Split") {
    const Json& pattern = Require(pre, "pattern", field, &Json::is_object, "an object");
    const Json* regex = Field(pattern, "Regex");
    const Json* text = regex ? regex : Field(pattern, "String");
    if (text == nullptr || !text->is_string()) {
      Fail(Code::kInvalidArgument, field + ".pattern must be {\"Regex\"|\"String\": ...}");
    }
    step.regex =
        std::make_shared<Regex>(text->get<std::string>(), regex == nullptr, where_, field + ".pattern");
    step.invert = BoolField(pre, "invert", false, field);
    const auto b = Require(pre, "behavior", field, &Json::is_string, "a string").get<std::string>();
    auto it = std::find(std::begin(kBehaviorNames), std::end(kBehaviorNames), b);
    if (it == std::end(kBehaviorNames)) Fail(Code::kUnimplemented, field + ".behavior " + b);
    step.behavior = static_cast<Behavior>(it - std::begin(kBehaviorNames));
  } else {
    Fail(Code::kUnimplemented, field + ".type " + type + " (only ByteLevel and Split)");
  }
  steps_.push_back(std::move(step));
}

void BpeTokenizer::LoadAddedTokens(const Json& added) {
  if (!added.is_array()) Fail(Code::kInvalidArgument, "added_tokens must be an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    const Json& t = added[i];
    if (!t.is_object()) Fail(Code::kInvalidArgument, field + " must be an object");
    AddedToken token;
    const Json& id = Require(t, "id", field, &Json::is_number_integer, "an integer");
    if (id.get<long long>() < 0 || id.get<long long>() >= kMaxId) {
      Fail(Code::kInvalidArgument, field + ".id must be an id < 2^24");
    }
    token.id = id.get<int>();
    token.content = Require(t, "content", field, &Json::is_string, "a string").get<std::string>();
    if (token.content.empty()) Fail(Code::kInvalidArgument, field + ".content is empty");
    token.special = BoolField(t, "special", false, field);
    token.lstrip = BoolField(t, "lstrip", false, field);
    token.rstrip = BoolField(t, "rstrip", false, field);
    token.single_word = BoolField(t, "single_word", false, field);
    plain_added_ = plain_added_ || !token.special;
    vocab_size_ = std::max(vocab_size_, token.id + 1);
    added_by_first_byte_[static_cast<unsigned char>(token.content[0])].push_back(
        static_cast<int>(added_.size()));
    added_.push_back(std::move(token));
  }
  for (auto& list : added_by_first_byte_) {
    std::stable_sort(list.begin(), list.end(),
                     [&](int a, int b) { return added_[a].content.size() > added_[b].content.size(); });
  }
}

std::optional<int> BpeTokenizer::PieceToId(std::string_view piece) const {
  for (const AddedToken& t : added_) {
    if (t.content == piece) return t.id;
  }
  auto it = vocab_.find(piece);
  return it == vocab_.end() ? std::nullopt : std::optional<int>(it->second);
}

std::vector<int> BpeTokenizer::Encode(std::string_view text, bool allow_special) const {
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 1);
  EncodeScratch scratch;
  // Added tokens split the text first (leftmost-longest, like Hugging Face's
  // Aho-Corasick); the sections between them are pre-tokenized on their own.
  size_t section = 0;
  // Without allow_special only the added tokens that are not special match
  // (Qwen 3's <think>), as Hugging Face's split_special_tokens.
  for (size_t i = 0; (allow_special || plain_added_) && i < text.size();) {
    const AddedToken* token = nullptr;
    for (int a : added_by_first_byte_[static_cast<unsigned char>(text[i])]) {
      if (!allow_special && added_[a].special) continue;
      const std::string& c = added_[a].content;
      const size_t end = i + c.size();
      if (text.compare(i, c.size(), c) != 0) continue;
      if (added_[a].single_word &&
          ((i > 0 && IsWordByte(text[i - 1])) || (end < text.size() && IsWordByte(text[end])))) {
        continue;
      }
      token = &added_[a];
      break;
    }
    if (token == nullptr) {
      ++i;
      continue;
    }
    size_t begin = i, end = i + token->content.size();
    while (token->lstrip && begin > section && IsAsciiSpace(text[begin - 1])) --begin;
    while (token->rstrip && end < text.size() && IsAsciiSpace(text[end])) ++end;
    EncodeSection(text.substr(section, begin - section), &scratch, &ids);
    ids.push_back(token->id);
    i = section = end;
  }
  EncodeSection(text.substr(section), &scratch, &ids);
  return ids;
}

void BpeTokenizer::EncodeSection(std::string_view section, EncodeScratch* s, std::vector<int>* ids) const {
  if (section.empty()) return;
  // NFC, on text that is not all ASCII (which NFC leaves as it is). Bytes
  // that are not UTF-8 cannot be normalized and go on as they are.
  std::string composed;
  if (nfc_ && std::any_of(section.begin(), section.end(), [](char c) { return (c & 0x80) != 0; })) {
    composed = NfcNormalize(section);
    section = composed;
  }
  PreTokenize(section, s);
  for (std::string_view piece : s->pieces) EncodePiece(piece, s, ids);
}

void BpeTokenizer::PreTokenize(std::string_view section, EncodeScratch* s) const {
  s->pieces.assign(1, section);
  s->arena.clear();
  for (const PreStep& step : steps_) {
    s->next_pieces.clear();
    for (std::string_view piece : s->pieces) {
      // Hugging Face prepends the space to every split the step sees.
      if (step.add_prefix_space && piece.front() != ' ') {
        piece = s->arena.emplace_back(" ").append(piece);
      }
      if (step.regex) {
        SplitPiece(step, piece, s);
      } else {
        s->next_pieces.push_back(piece);
      }
    }
    std::swap(s->pieces, s->next_pieces);
  }
}

std::vector<std::string> BpeTokenizer::PreTokenized(std::string_view text) const {
  EncodeScratch scratch;
  PreTokenize(text, &scratch);
  return std::vector<std::string>(scratch.pieces.begin(), scratch.pieces.end());
}

std::string NfcNormalize(std::string_view text) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::string composed =
      n >= 0 ? std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n)) : std::string(text);
  std::free(out);
  return composed;
}

std::vector<std::string> BpePreTokenize(const Tokenizer& tokenizer, std::string_view text) {
  const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tokenizer);
  return bpe ? bpe->PreTokenized(text) : std::vector<std::string>();
}

// BPE on one pre-token, on bytes: each byte starts as its byte-level
// character's id; then the adjacent pair of lowest merge rank (leftmost on
// ties) is merged until none is left. A min-heap of candidate pairs, checked
// for staleness when popped, makes this O(n log n) (Hugging Face's
// Word::merge_all, whose results it reproduces exactly).
void BpeTokenizer::EncodePiece(std::string_view piece, EncodeScratch* s, std::vector<int>* ids) const {
  if (ignore_merges_ && piece.size() > 1) {
    // Llama 3: a pre-token that is itself in the vocab is emitted whole.
    s->mapped.clear();
    for (char c : piece) s->mapped += Tables().byte_to_utf8[static_cast<unsigned char>(c)];
    if (auto it = vocab_.find(std::string_view(s->mapped)); it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  auto& symbols = s->symbols;
  symbols.clear();
  for (char c : piece) {
    const int byte_id = byte_ids_[static_cast<unsigned char>(c)];
    const int id = byte_id >= 0 ? byte_id : unk_id_;
    if (id < 0) continue;  // no unk token: Hugging Face drops the byte too
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  auto& heap = s->heap;
  heap.clear();
  const auto push = [&](int pos) {
    auto it = merges_.find(PairKey(symbols[pos].id, symbols[symbols[pos].next].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, it->second.new_id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const EncodeScratch::Candidate top = heap.back();
    heap.pop_back();
    EncodeScratch::Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    EncodeScratch::Symbol& right = symbols[left.next];
    auto it = merges_.find(PairKey(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    if (left.next >= 0) push(top.pos);
  }
  // symbols[0] is never merged away (merges remove the right symbol).
  for (int i = 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
}

std::string BpeTokenizer::Decode(const std::vector<int>& ids, bool skip_special) const {
  std::string out;
  for (int id : ids) {
    if (id < 0 || id >= vocab_size_) continue;  // unknown: skipped, as Hugging Face does
    if (const int a = added_index_[id]; a >= 0) {
      // Added tokens are inserted verbatim, not through the byte-level decoder.
      if (!(skip_special && added_[a].special)) out += added_[a].content;
    } else {
      out += id_to_bytes_[id];
    }
  }
  return out;
}

std::unique_ptr<Tokenizer> LoadBpeTokenizer(const std::filesystem::path& tokenizer_json) {
  return LoadBpeTokenizerFromBytes(ReadFile(tokenizer_json), tokenizer_json.string());
}

std::unique_ptr<Tokenizer> LoadBpeTokenizerFromBytes(std::string_view json_text, const std::string& name) {
  const Json root = ParseJson(std::string(json_text), name);
  return std::make_unique<BpeTokenizer>(root, name);
}

}  // namespace burst
