// SentencePiece tokenizer without libsentencepiece; see sp_tokenizer.h for the
// scope. The code follows sentencepiece 0.1.97 (the version Debian ships and
// the tests compare with) function by function: model_interface.cc
// (InitializePieces, PieceToId), normalizer.cc (Normalize, NormalizePrefix),
// bpe_model.cc (Encode), unigram_model.cc (EncodeOptimized, the default
// encoder), sentencepiece_processor.cc (PopulateSentencePieceText for unknown
// pieces, Decode). Where it looks odd (float/double mixes in the Viterbi
// scores, rev_merge updates), it is on purpose: ties must break the same way.
#include "model/sp_tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/fs.h"
#include "core/status.h"
#include "model/sp_model_proto.h"

namespace burst {
namespace {

// U+2581 LOWER ONE EIGHTH BLOCK: SentencePiece's visible stand-in for a space.
constexpr std::string_view kSpaceSymbol = "\xe2\x96\x81";
constexpr std::string_view kReplacementChar = "\xef\xbf\xbd";      // U+FFFD
constexpr std::string_view kDefaultUnkSurface = " \xe2\x81\x87 ";  // " ⁇ "
// unigram_model.cc: unknown characters score min(normal scores) - 10.
constexpr float kUnkPenalty = 10.0f;

using namespace sp;  // ModelProto and its parts (sp_model_proto.h)

// ------------------------------------------------------------------------------------------------
// UTF-8, exactly as sentencepiece's util.h/util.cc judge it.

// Length of a character from its first byte alone (string_util::OneCharLen).
inline int OneCharLen(char c) {
  return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(static_cast<unsigned char>(c)) >> 4];
}

inline bool IsTrailByte(char c) { return static_cast<signed char>(c) < -0x40; }

inline bool IsValidCodepoint(uint32_t c) { return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF); }

// string_util::IsValidDecodeUTF8: whether `s` starts with a valid character
// (no overlong forms, no surrogates); *len is its length, 1 when invalid.
// U+FFFD itself counts as valid.
bool StartsWithValidUtf8(std::string_view s, size_t* len) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  *len = 1;
  if (b[0] < 0x80) return true;
  if (n >= 2 && (b[0] & 0xE0) == 0xC0) {
    const uint32_t cp = ((b[0] & 0x1Fu) << 6) | (b[1] & 0x3Fu);
    if (IsTrailByte(s[1]) && cp >= 0x80 && IsValidCodepoint(cp)) return *len = 2, true;
  } else if (n >= 3 && (b[0] & 0xF0) == 0xE0) {
    const uint32_t cp = ((b[0] & 0x0Fu) << 12) | ((b[1] & 0x3Fu) << 6) | (b[2] & 0x3Fu);
    if (IsTrailByte(s[1]) && IsTrailByte(s[2]) && cp >= 0x800 && IsValidCodepoint(cp)) {
      return *len = 3, true;
    }
  } else if (n >= 4 && (b[0] & 0xF8) == 0xF0) {
    const uint32_t cp =
        ((b[0] & 0x07u) << 18) | ((b[1] & 0x3Fu) << 12) | ((b[2] & 0x3Fu) << 6) | (b[3] & 0x3Fu);
    if (IsTrailByte(s[1]) && IsTrailByte(s[2]) && IsTrailByte(s[3]) && cp >= 0x10000 &&
        IsValidCodepoint(cp)) {
      return *len = 4, true;
    }
  }
  return false;
}

// "<0x41>" -> 0x41; -1 for anything else. Only the exact upper-case form that
// sentencepiece writes counts (ByteToPiece/PieceToByte).
int PieceToByte(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= c - '0';
    } else if (c >= 'A' && c <= 'F') {
      value |= c - 'A' + 10;
    } else {
      return -1;
    }
  }
  return value;
}

std::string ReplaceSpaceSymbols(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (piece.substr(i, kSpaceSymbol.size()) == kSpaceSymbol) {
      out += ' ';
      i += kSpaceSymbol.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// A byte trie over pieces (sentencepiece uses a darts double array; only the
// set of matches and their order, shortest first, matter). Children of a node
// are contiguous and sorted by byte.

class PieceTrie {
 public:
  // `keys` need not be sorted; values are ids.
  void Build(std::vector<std::pair<std::string_view, int>> keys) {
    std::sort(keys.begin(), keys.end());
    nodes_.assign(1, Node{});
    labels_.clear();
    targets_.clear();
    if (keys.empty()) return;
    struct Pending {
      uint32_t node;
      size_t lo, hi, depth;
    };
    std::vector<Pending> queue = {{0, 0, keys.size(), 0}};
    for (size_t q = 0; q < queue.size(); ++q) {
      const Pending p = queue[q];
      size_t i = p.lo;
      // Sorted: a key that ends at this depth comes first (keys are unique).
      if (keys[i].first.size() == p.depth) nodes_[p.node].value = keys[i++].second;
      nodes_[p.node].child_begin = static_cast<uint32_t>(labels_.size());
      while (i < p.hi) {
        const auto label = static_cast<unsigned char>(keys[i].first[p.depth]);
        size_t j = i;
        while (j < p.hi && static_cast<unsigned char>(keys[j].first[p.depth]) == label) ++j;
        const auto child = static_cast<uint32_t>(nodes_.size());
        nodes_.push_back(Node{});
        labels_.push_back(label);
        targets_.push_back(child);
        queue.push_back({child, i, j, p.depth + 1});
        i = j;
      }
      nodes_[p.node].child_end = static_cast<uint32_t>(labels_.size());
    }
  }

  bool empty() const { return labels_.empty() && (nodes_.empty() || nodes_[0].value < 0); }

  // Calls fn(length, value) for every key that is a prefix of s, shortest first.
  template <typename Fn>
  void ForEachPrefix(std::string_view s, Fn&& fn) const {
    uint32_t node = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      node = Child(node, static_cast<unsigned char>(s[i]));
      if (node == 0) return;
      if (nodes_[node].value >= 0) fn(i + 1, nodes_[node].value);
    }
  }

  // Length of the longest key that prefixes s; 0 when none.
  size_t LongestPrefix(std::string_view s) const {
    size_t longest = 0;
    ForEachPrefix(s, [&](size_t len, int) { longest = len; });
    return longest;
  }

 private:
  struct Node {
    int value = -1;
    uint32_t child_begin = 0, child_end = 0;
  };

  // 0 (the root, never a child) when there is no such child.
  uint32_t Child(uint32_t node, unsigned char label) const {
    const Node& n = nodes_[node];
    const unsigned char* begin = labels_.data() + n.child_begin;
    const unsigned char* end = labels_.data() + n.child_end;
    const unsigned char* it;
    if (end - begin <= 8) {
      it = std::find(begin, end, label);
    } else {
      it = std::lower_bound(begin, end, label);
    }
    if (it == end || *it != label) return 0;
    return targets_[it - labels_.data()];
  }

  std::vector<Node> nodes_ = std::vector<Node>(1);
  std::vector<unsigned char> labels_;
  std::vector<uint32_t> targets_;
};

// ------------------------------------------------------------------------------------------------
// precompiled_charsmap: <uint32 LE trie size><darts-clone double array><NUL-
// separated replacement strings>. The double array maps a UTF-8 prefix to the
// offset of its replacement; NormalizePrefix uses the longest match.

class CharsMap {
 public:
  CharsMap() = default;
  CharsMap(std::string_view blob, const std::string& file) {
    if (blob.size() <= 4) Corrupt(file, "shorter than its header");
    uint32_t trie_size = 0;
    for (int i = 3; i >= 0; --i) trie_size = (trie_size << 8) | static_cast<unsigned char>(blob[i]);
    if (trie_size >= blob.size() - 4 + 1 || trie_size % 4 != 0) {
      Corrupt(file, "trie size " + std::to_string(trie_size) + " does not fit");
    }
    units_.resize(trie_size / 4);
    for (size_t u = 0; u < units_.size(); ++u) {
      uint32_t v = 0;
      for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(blob[4 + u * 4 + i]);
      units_[u] = v;
    }
    normalized_ = std::string(blob.substr(4 + trie_size));
    if (units_.empty()) Corrupt(file, "empty trie");
  }

  bool empty() const { return units_.empty(); }

  // darts-clone commonPrefixSearch keeping the longest match: returns its
  // length (0 when none) and sets *replacement. Out-of-range units (a corrupt
  // array) end the search as a mismatch would.
  size_t LongestMatch(std::string_view key, std::string_view* replacement, const std::string& file) const {
    size_t longest = 0;
    uint32_t value = 0;
    size_t node = Offset(units_[0]);
    for (size_t i = 0; i < key.size(); ++i) {
      const auto c = static_cast<unsigned char>(key[i]);
      node ^= c;
      if (node >= units_.size()) break;
      const uint32_t unit = units_[node];
      if ((unit & ((1u << 31) | 0xFFu)) != c) break;  // label
      node ^= Offset(unit);
      if (node >= units_.size()) break;
      if ((unit >> 8) & 1) {  // has_leaf
        longest = i + 1;
        value = units_[node] & ((1u << 31) - 1);
      }
    }
    if (longest > 0) {
      if (value >= normalized_.size()) {
        Corrupt(file, "replacement offset " + std::to_string(value) + " past the end");
      }
      // strlen bounded by the blob: replacements are NUL-terminated (a
      // search for the terminator, which the check takes for a copy).
      const char* start = normalized_.data() + value;
      // NOLINTNEXTLINE(bugprone-not-null-terminated-result)
      const void* nul = std::memchr(start, '\0', normalized_.size() - value);
      if (nul == nullptr) Corrupt(file, "unterminated replacement");
      *replacement = std::string_view(start, static_cast<const char*>(nul) - start);
    }
    return longest;
  }

 private:
  static size_t Offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

  [[noreturn]] static void Corrupt(const std::string& file, const std::string& what) {
    throw Error(Code::kDataLoss, file + ": corrupt SentencePiece model: precompiled_charsmap " + what, file);
  }

  std::vector<uint32_t> units_;
  std::string normalized_;
};

// ------------------------------------------------------------------------------------------------

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(ModelProto model, const std::string& file);

  std::vector<int> Encode(std::string_view text, bool allow_special) const override;
  std::string Decode(const std::vector<int>& ids, bool skip_special) const override;

  std::string IdToPiece(int id) const override { return InRange(id) ? pieces_[id].piece : std::string(); }

  std::optional<int> PieceToId(std::string_view piece) const override {
    const int id = Lookup(piece);
    if (id < 0) return std::nullopt;
    return id;
  }

  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  // Control pieces are never matched in text (sentencepiece's rule) and
  // user-defined ones always are; a template writes both as themselves.
  std::vector<std::pair<std::string, int>> SpecialTexts() const override {
    std::vector<std::pair<std::string, int>> out;
    for (size_t i = 0; i < pieces_.size(); ++i) {
      if (pieces_[i].type == PieceType::kControl || pieces_[i].type == PieceType::kUserDefined)
        out.emplace_back(pieces_[i].piece, static_cast<int>(i));
    }
    return out;
  }

  bool IsSpecial(int id) const override {
    if (!InRange(id)) return false;
    const PieceType t = pieces_[id].type;
    return t == PieceType::kControl || t == PieceType::kUnknown || t == PieceType::kUserDefined ||
           added_special_ids.count(id) > 0;
  }

 private:
  using EncodeResult = std::vector<std::pair<std::string_view, int>>;
  // Where EncodeBpe may cut the text into independent segments. kBeforeSpace:
  // no piece holds a space symbol right after another character, so nothing
  // merges across "x|▁" (the usual prefix-space models); kAfterSpace: no piece
  // holds a character right after a space symbol ("▁|x", suffix models);
  // kNone: neither, or the model has UNUSED pieces (their re-split depends on
  // the global merge history), so the text stays whole.
  enum class BpeSplit { kNone, kBeforeSpace, kAfterSpace };

  bool InRange(int id) const { return id >= 0 && id < static_cast<int>(pieces_.size()); }
  PieceType Type(int id) const { return pieces_[id].type; }

  // ModelInterface::PieceToId without the unk fallback: control/unknown/byte
  // pieces first, then the others; -1 when absent.
  int Lookup(std::string_view piece) const {
    if (auto it = reserved_.find(piece); it != reserved_.end()) return it->second;
    if (auto it = normal_.find(piece); it != normal_.end()) return it->second;
    return -1;
  }
  int LookupOrUnk(std::string_view piece) const {
    const int id = Lookup(piece);
    return id < 0 ? unk_id_ : id;
  }

  // Length of the user-defined symbol at the start of s (0 when none).
  size_t MatchUserDefined(std::string_view s) const {
    return user_defined_.empty() ? 0 : user_defined_.LongestPrefix(s);
  }

  std::pair<std::string_view, size_t> NormalizePrefix(std::string_view input) const;
  std::string Normalize(std::string_view input) const;
  EncodeResult EncodeBpe(std::string_view normalized) const;
  EncodeResult EncodeUnigram(std::string_view normalized) const;
  std::string DecodeRun(const std::vector<int>& ids) const;
  BpeSplit ChooseBpeSplit() const;

  std::string file_;
  std::vector<PieceProto> pieces_;
  TrainerSpecProto trainer_;
  NormalizerSpecProto normalizer_;
  CharsMap charsmap_;
  // Keys view the strings in pieces_, which never change after construction.
  std::unordered_map<std::string_view, int> normal_;    // NORMAL, USER_DEFINED, UNUSED
  std::unordered_map<std::string_view, int> reserved_;  // UNKNOWN, CONTROL, BYTE
  PieceTrie user_defined_;
  PieceTrie unigram_trie_;  // normal_ as a trie, for UNIGRAM
  std::array<int, 256> byte_ids_{};
  int unk_id_ = -1;
  BpeSplit bpe_split_ = BpeSplit::kNone;
  float min_score_ = 0.0f, max_score_ = 0.0f;  // over NORMAL pieces (UNIGRAM)
};

SentencePieceTokenizer::SentencePieceTokenizer(ModelProto model, const std::string& file)
    : file_(file), pieces_(std::move(model.pieces)) {
  auto invalid = [&](const std::string& what) {
    throw Error(Code::kDataLoss, file_ + ": invalid SentencePiece model: " + what, file_);
  };
  // A file cut at a field boundary parses; spm_train and every converter write
  // both specs after the pieces, so their absence means truncation.
  if (!model.trainer_spec) invalid("no trainer_spec (truncated file?)");
  if (!model.normalizer_spec) invalid("no normalizer_spec (truncated file?)");
  trainer_ = *model.trainer_spec;
  normalizer_ = *model.normalizer_spec;

  if (trainer_.model_type != kBpe && trainer_.model_type != kUnigram) {
    throw Error(Code::kUnimplemented,
                file_ + ": SentencePiece model type " +
                    (trainer_.model_type == kWord ? std::string("WORD") : std::string("CHAR")) +
                    " is not supported (only BPE and UNIGRAM)",
                file_);
  }
  if (model.denormalizer_spec && !model.denormalizer_spec->precompiled_charsmap.empty()) {
    throw Error(Code::kUnimplemented,
                file_ + ": SentencePiece denormalizer_spec \"" + model.denormalizer_spec->name +
                    "\" is not supported",
                file_);
  }
  if (!normalizer_.precompiled_charsmap.empty()) {
    charsmap_ = CharsMap(normalizer_.precompiled_charsmap, file_);
  }

  // model_interface.cc InitializePieces.
  if (pieces_.empty()) invalid("no pieces");
  std::array<bool, 256> byte_found{};
  std::vector<std::pair<std::string_view, int>> user_defined;
  min_score_ = std::numeric_limits<float>::max();
  max_score_ = std::numeric_limits<float>::min();  // sic: unigram_model.cc starts at FLT_MIN
  for (int i = 0; i < static_cast<int>(pieces_.size()); ++i) {
    const PieceProto& p = pieces_[i];
    if (p.piece.empty()) invalid("piece " + std::to_string(i) + " is empty");
    const bool is_normal =
        p.type == PieceType::kNormal || p.type == PieceType::kUserDefined || p.type == PieceType::kUnused;
    if (!(is_normal ? normal_ : reserved_).emplace(p.piece, i).second) {
      invalid("piece \"" + p.piece + "\" is defined twice");
    }
    if (p.type == PieceType::kUserDefined) user_defined.emplace_back(p.piece, i);
    if (p.type == PieceType::kNormal) {
      min_score_ = std::min(min_score_, p.score);
      max_score_ = std::max(max_score_, p.score);
    }
    if (p.type == PieceType::kUnknown) {
      if (unk_id_ >= 0) invalid("more than one unknown piece");
      unk_id_ = i;
    }
    if (p.type == PieceType::kByte) {
      if (!trainer_.byte_fallback) {
        invalid("byte piece " + p.piece + " although byte_fallback is false");
      }
      const int b = PieceToByte(p.piece);
      if (b < 0) invalid("invalid byte piece " + p.piece);
      byte_found[b] = true;
      byte_ids_[b] = i;
    }
  }
  if (unk_id_ < 0) invalid("no unknown piece");
  if (trainer_.byte_fallback && std::find(byte_found.begin(), byte_found.end(), false) != byte_found.end()) {
    invalid("byte_fallback is true but not all 256 byte pieces exist");
  }
  user_defined_.Build(std::move(user_defined));
  if (trainer_.model_type == kBpe) bpe_split_ = ChooseBpeSplit();
  if (trainer_.model_type == kUnigram) {
    std::vector<std::pair<std::string_view, int>> keys(normal_.begin(), normal_.end());
    if (keys.empty()) invalid("no normal pieces");
    unigram_trie_.Build(std::move(keys));
  }

  kind = "sentencepiece";
  // sentencepiece_processor.cc bos_id() etc.: the id of the named piece when
  // that piece is a control symbol.
  auto control_id = [&](const std::string& name, const char* def) -> std::optional<int> {
    const int id = LookupOrUnk(name.empty() ? std::string_view(def) : std::string_view(name));
    if (InRange(id) && Type(id) == PieceType::kControl) return id;
    return std::nullopt;
  };
  bos_id = control_id(trainer_.bos_piece, "<s>");
  eos_id = control_id(trainer_.eos_piece, "</s>");
  pad_id = control_id(trainer_.pad_piece, "<pad>");
}

SentencePieceTokenizer::BpeSplit SentencePieceTokenizer::ChooseBpeSplit() const {
  const std::string_view space = normalizer_.escape_whitespaces ? kSpaceSymbol : std::string_view(" ");
  bool before_ok = true, after_ok = true;
  for (const auto& [piece, id] : normal_) {
    if (Type(id) == PieceType::kUnused) return BpeSplit::kNone;
    // Walk the characters (as the BPE splits them), comparing neighbours.
    int prev = -1;  // -1: none yet, 0: not a space, 1: a space
    for (size_t i = 0; i < piece.size();) {
      const size_t len = std::min<size_t>(piece.size() - i, OneCharLen(piece[i]));
      const int cur = piece.substr(i, len) == space ? 1 : 0;
      if (prev == 0 && cur == 1) before_ok = false;
      if (prev == 1 && cur == 0) after_ok = false;
      prev = cur;
      i += len;
    }
  }
  return before_ok ? BpeSplit::kBeforeSpace : after_ok ? BpeSplit::kAfterSpace : BpeSplit::kNone;
}

// normalizer.cc NormalizePrefix: the normalized form of the first character
// (or user-defined symbol, or charsmap rule) of input, and how many input
// bytes it consumed.
std::pair<std::string_view, size_t> SentencePieceTokenizer::NormalizePrefix(std::string_view input) const {
  // User-defined symbols pass through unnormalized.
  if (const size_t n = MatchUserDefined(input); n > 0) return {input.substr(0, n), n};
  if (!charsmap_.empty()) {
    std::string_view replacement;
    if (const size_t n = charsmap_.LongestMatch(input, &replacement, file_); n > 0) {
      return {replacement, n};
    }
  }
  size_t len;
  // A malformed byte becomes U+FFFD, consuming one byte.
  if (!StartsWithValidUtf8(input, &len)) return {kReplacementChar, 1};
  return {input.substr(0, len), len};
}

// normalizer.cc Normalize (without the alignment, which Burst does not need).
std::string SentencePieceTokenizer::Normalize(std::string_view input) const {
  std::string out;
  const bool remove_extra = normalizer_.remove_extra_whitespaces;
  const bool escape = normalizer_.escape_whitespaces;
  if (remove_extra) {  // leading whitespace
    while (!input.empty()) {
      const auto [piece, consumed] = NormalizePrefix(input);
      if (piece != " ") break;
      input.remove_prefix(consumed);
    }
  }
  if (input.empty()) return out;
  out.reserve(input.size() * 3);
  const std::string_view space = escape ? kSpaceSymbol : std::string_view(" ");
  const bool suffix = trainer_.treat_whitespace_as_suffix;
  if (!suffix && normalizer_.add_dummy_prefix) out += space;
  bool is_prev_space = remove_extra;
  while (!input.empty()) {
    auto [piece, consumed] = NormalizePrefix(input);
    while (is_prev_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    if (!piece.empty()) {
      for (char c : piece) {
        if (escape && c == ' ') {
          out += kSpaceSymbol;
        } else {
          out += c;
        }
      }
      is_prev_space = piece.back() == ' ';
    }
    input.remove_prefix(consumed);
    if (!remove_extra) is_prev_space = false;
  }
  if (remove_extra) {  // trailing whitespace
    while (out.size() >= space.size() && std::string_view(out).substr(out.size() - space.size()) == space) {
      out.resize(out.size() - space.size());
    }
  }
  if (suffix && normalizer_.add_dummy_prefix) out += space;
  return out;
}

// bpe_model.cc Model::SampleEncode with alpha = 0.
//
// sentencepiece runs one agenda over the whole text; on 1 MB that is a
// million-entry heap. Burst cuts the text where no merge can ever cross (see
// bpe_split_) and runs the same algorithm per segment. That is exact: a merge
// only joins neighbours inside a segment, so each segment sees the same pairs,
// scores and leftmost-first ties in the same order as in the global run.
SentencePieceTokenizer::EncodeResult SentencePieceTokenizer::EncodeBpe(std::string_view normalized) const {
  struct Symbol {
    int prev;     // -1 at the start of the segment
    int next;     // -1 at the end of the segment
    bool freeze;  // a user-defined symbol: never merged
    std::string_view piece;
  };
  struct Pair {
    int left, right;
    float score;
    size_t size;
  };
  // Highest score first; on a tie the leftmost pair.
  auto lower = [](const Pair& a, const Pair& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(lower)> agenda(lower);
  std::vector<Symbol> symbols;
  symbols.reserve(normalized.size());
  // Merged UNUSED piece -> the pair it was last made from, to split it back.
  // With UNUSED pieces the text is one segment, so this history is global as
  // in sentencepiece.
  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> rev_merge;

  auto maybe_add_pair = [&](int left, int right) {
    if (left == -1 || right == -1 || symbols[left].freeze || symbols[right].freeze) return;
    const std::string_view piece(symbols[left].piece.data(),
                                 symbols[left].piece.size() + symbols[right].piece.size());
    const auto it = normal_.find(piece);
    if (it == normal_.end()) return;
    agenda.push(Pair{left, right, pieces_[it->second].score, piece.size()});
    if (Type(it->second) == PieceType::kUnused) {
      rev_merge[piece] = {symbols[left].piece, symbols[right].piece};
    }
  };

  // Characters, or whole user-defined symbols.
  for (std::string_view rest = normalized; !rest.empty();) {
    size_t len = MatchUserDefined(rest);
    const bool freeze = len > 0;
    if (!freeze) len = std::min<size_t>(rest.size(), OneCharLen(rest[0]));
    symbols.push_back(Symbol{-1, -1, freeze, rest.substr(0, len)});
    rest.remove_prefix(len);
  }

  EncodeResult out;
  // UNUSED pieces are never output: split them back into what they came from.
  auto resegment = [&](auto&& self, std::string_view w) -> void {
    const int id = LookupOrUnk(w);
    if (id == -1 || Type(id) != PieceType::kUnused) {
      out.emplace_back(w, id);
      return;
    }
    const auto p = rev_merge.find(w);
    if (p == rev_merge.end()) {
      out.emplace_back(w, id);
      return;
    }
    self(self, p->second.first);
    self(self, p->second.second);
  };

  // Merges symbols [lo, hi) as sentencepiece merges the whole text.
  auto run_segment = [&](int lo, int hi) {
    for (int i = lo; i < hi; ++i) {
      symbols[i].prev = i == lo ? -1 : i - 1;
      symbols[i].next = i + 1 == hi ? -1 : i + 1;
    }
    for (int i = lo + 1; i < hi; ++i) maybe_add_pair(i - 1, i);
    while (!agenda.empty()) {
      const Pair top = agenda.top();
      agenda.pop();
      Symbol& left = symbols[top.left];
      Symbol& right = symbols[top.right];
      // Stale: one side was merged away or grew since the pair was queued.
      if (left.piece.empty() || right.piece.empty() || left.piece.size() + right.piece.size() != top.size) {
        continue;
      }
      left.piece = std::string_view(left.piece.data(), left.piece.size() + right.piece.size());
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = top.left;
      right.piece = std::string_view();
      maybe_add_pair(left.prev, top.left);
      maybe_add_pair(top.left, left.next);
    }
    for (int i = lo; i != -1; i = symbols[i].next) resegment(resegment, symbols[i].piece);
  };

  const std::string_view space = normalizer_.escape_whitespaces ? kSpaceSymbol : std::string_view(" ");
  // Whether no merge can join symbols j - 1 and j (see bpe_split_).
  auto is_cut = [&](size_t j) {
    const Symbol& a = symbols[j - 1];
    const Symbol& b = symbols[j];
    if (a.freeze || b.freeze) return true;
    if (bpe_split_ == BpeSplit::kBeforeSpace) return b.piece == space && a.piece != space;
    return a.piece == space && b.piece != space;  // kAfterSpace
  };
  const int n = static_cast<int>(symbols.size());
  int lo = 0;
  for (int j = 1; j <= n; ++j) {
    if (j == n || (bpe_split_ != BpeSplit::kNone && is_cut(j))) {
      run_segment(lo, j);
      lo = j;
    }
  }
  return out;
}

// unigram_model.cc Model::EncodeOptimized: Viterbi over byte positions.
SentencePieceTokenizer::EncodeResult SentencePieceTokenizer::EncodeUnigram(
    std::string_view normalized) const {
  struct BestPathNode {
    int id = -1;
    double best_path_score = 0;
    int starts_at = -1;
  };
  const int size = static_cast<int>(normalized.size());
  const double unk_score = static_cast<double>(min_score_ - kUnkPenalty);
  std::vector<BestPathNode> best(size + 1);
  for (int starts_at = 0; starts_at < size;) {
    const double score_till_here = best[starts_at].best_path_score;
    bool has_single_node = false;
    const int mblen = std::min<int>(OneCharLen(normalized[starts_at]), size - starts_at);
    unigram_trie_.ForEachPrefix(normalized.substr(starts_at), [&](size_t length, int id) {
      if (Type(id) == PieceType::kUnused) return;
      BestPathNode& target = best[starts_at + length];
      // As sentencepiece (0.2) computes it: the path's score in double, the
      // user-defined bonus from a float product.
      const double score = Type(id) == PieceType::kUserDefined
                               ? static_cast<double>(static_cast<float>(length) * max_score_) - 0.1
                               : static_cast<double>(pieces_[id].score);
      const double candidate = score + score_till_here;
      if (target.starts_at == -1 || candidate > target.best_path_score) {
        target.best_path_score = candidate;
        target.starts_at = starts_at;
        target.id = id;
      }
      if (!has_single_node && static_cast<int>(length) == mblen) has_single_node = true;
    });
    if (!has_single_node) {
      BestPathNode& target = best[starts_at + mblen];
      const double candidate = unk_score + score_till_here;
      if (target.starts_at == -1 || candidate > target.best_path_score) {
        target.best_path_score = candidate;
        target.starts_at = starts_at;
        target.id = unk_id_;
      }
    }
    starts_at += mblen;
  }
  EncodeResult out;
  for (int ends_at = size; ends_at > 0;) {
    const BestPathNode& node = best[ends_at];
    out.emplace_back(normalized.substr(node.starts_at, ends_at - node.starts_at), node.id);
    ends_at = node.starts_at;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<int> SentencePieceTokenizer::Encode(std::string_view text, bool /*allow_special*/) const {
  const std::string normalized = Normalize(text);
  if (normalized.empty()) return {};
  const EncodeResult result = trainer_.model_type == kBpe ? EncodeBpe(normalized) : EncodeUnigram(normalized);
  // sentencepiece_processor.cc PopulateSentencePieceText: an unknown piece
  // becomes its UTF-8 bytes with byte_fallback; otherwise a run of unknown
  // pieces is merged into one.
  std::vector<int> ids;
  ids.reserve(result.size());
  bool is_prev_unk = false;
  for (const auto& [piece, id] : result) {
    const bool is_unk = id >= 0 && Type(id) == PieceType::kUnknown;
    if (is_unk && trainer_.byte_fallback) {
      for (char c : piece) ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
    } else if (!(is_prev_unk && is_unk)) {
      ids.push_back(id);
    }
    is_prev_unk = is_unk;
  }
  return ids;
}

// sentencepiece_processor.cc Decode of a list of pieces (no control ids in
// Burst's runs, but they would decode to nothing there too).
std::string SentencePieceTokenizer::DecodeRun(const std::vector<int>& ids) const {
  std::string text;
  std::string bytes;  // consecutive byte pieces, turned into UTF-8 together
  auto flush_bytes = [&]() {
    for (size_t off = 0; off < bytes.size();) {
      size_t len;
      if (StartsWithValidUtf8(std::string_view(bytes).substr(off), &len)) {
        text.append(bytes, off, len);
      } else {
        text += kReplacementChar;
      }
      off += len;
    }
    bytes.clear();
  };
  const bool strip_bos_ws = normalizer_.add_dummy_prefix || normalizer_.remove_extra_whitespaces;
  bool is_bos_ws = true;  // whether a leading space may still be dropped
  bool bos_ws_seen = false;
  for (int id : ids) {
    const PieceProto& p = pieces_[id];
    if (p.type == PieceType::kByte) {
      bytes += static_cast<char>(PieceToByte(p.piece));
      continue;
    }
    flush_bytes();
    if (bos_ws_seen || !text.empty()) is_bos_ws = false;
    bos_ws_seen = false;
    if (p.type == PieceType::kControl) continue;
    if (p.type == PieceType::kUnknown) {
      text += trainer_.unk_surface ? std::string_view(*trainer_.unk_surface) : kDefaultUnkSurface;
      continue;
    }
    std::string_view piece = p.piece;
    if (is_bos_ws && strip_bos_ws && piece.substr(0, kSpaceSymbol.size()) == kSpaceSymbol) {
      piece.remove_prefix(kSpaceSymbol.size());
      // With remove_extra_whitespaces every leading space goes, so keep looking.
      bos_ws_seen = !normalizer_.remove_extra_whitespaces;
    }
    text += ReplaceSpaceSymbols(piece);
  }
  flush_bytes();
  return text;
}

std::string SentencePieceTokenizer::Decode(const std::vector<int>& ids, bool skip_special) const {
  std::string text;
  std::vector<int> run;
  run.reserve(ids.size());
  for (int id : ids) {
    if (!InRange(id)) continue;
    if (skip_special && IsSpecial(id)) continue;
    // sentencepiece drops control tokens; Burst spells them ("<s>") unless
    // skip_special. Each run between them decodes on its own, so a leading
    // dummy-prefix space after a control token is dropped as at the start.
    if (Type(id) == PieceType::kControl) {
      text += DecodeRun(run);
      text += pieces_[id].piece;
      run.clear();
    } else {
      run.push_back(id);
    }
  }
  return text + DecodeRun(run);
}

}  // namespace

std::unique_ptr<Tokenizer> LoadSentencePieceTokenizer(const std::filesystem::path& model_file) {
  return LoadSentencePieceTokenizerFromBytes(ReadFile(model_file), model_file.string());
}

std::unique_ptr<Tokenizer> LoadSentencePieceTokenizerFromBytes(std::string_view data,
                                                               const std::string& name) {
  return std::make_unique<SentencePieceTokenizer>(ParseModel(data, name), name);
}

}  // namespace burst
