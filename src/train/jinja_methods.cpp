// The attribute, item and slice lookups of jinja_builtins.h and the str and
// dict methods they bind: Python's, on UTF-8 code points, each piece of a
// result keeping its bytes' origin.
#include <algorithm>
#include <map>
#include <optional>

#include "train/jinja_builtins.h"
#include "train/jinja_internal.h"

namespace burst::jinja {

namespace {

using internal::IsPySpace;

// A Text's code points.
struct Chars {
  explicit Chars(const Text& text) : t(text), at(CodePointStarts(text.s)) {}
  size_t size() const { return at.size() - 1; }
  uint32_t operator[](size_t k) const { return internal::CodePointAt(t.s, at[k], at[k + 1]); }
  Text Sub(size_t k0, size_t k1) const { return t.Sub(at[k0], at[k1] - at[k0]); }
  // The index of the code point that starts at byte `pos`.
  int64_t IndexOf(size_t pos) const { return std::lower_bound(at.begin(), at.end(), pos) - at.begin(); }
  const Text& t;
  std::vector<size_t> at;
};

void AppendUtf8(uint32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | c >> 6);
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | c >> 12);
    out += static_cast<char>(0x80 | (c >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | c >> 18);
    out += static_cast<char>(0x80 | (c >> 12 & 0x3f));
    out += static_cast<char>(0x80 | (c >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

// Upper-case letters and their lower case: c + delta, or, where delta is 0,
// pairs of an upper (even offset from lo) then its lower. Latin, Greek,
// Cyrillic, Armenian and full-width Latin, which is what chat data holds
// in cased scripts; Python knows all of Unicode.
struct CaseRange {
  uint32_t lo, hi;
  int delta;
};
constexpr CaseRange kCases[] = {
    {0x41, 0x5a, 32},     {0xc0, 0xd6, 32},   {0xd8, 0xde, 32},     {0x100, 0x12f, 0},   {0x132, 0x137, 0},
    {0x139, 0x148, 0},    {0x14a, 0x177, 0},  {0x178, 0x178, -121}, {0x179, 0x17e, 0},   {0x1cd, 0x1dc, 0},
    {0x1de, 0x1ef, 0},    {0x1f8, 0x21f, 0},  {0x222, 0x233, 0},    {0x386, 0x386, 38},  {0x388, 0x38a, 37},
    {0x38c, 0x38c, 64},   {0x38e, 0x38f, 63}, {0x391, 0x3a1, 32},   {0x3a3, 0x3ab, 32},  {0x3d8, 0x3ef, 0},
    {0x400, 0x40f, 80},   {0x410, 0x42f, 32}, {0x460, 0x481, 0},    {0x48a, 0x4bf, 0},   {0x4c0, 0x4c0, 15},
    {0x4c1, 0x4ce, 0},    {0x4d0, 0x52f, 0},  {0x531, 0x556, 48},   {0x1e00, 0x1e95, 0}, {0x1ea0, 0x1eff, 0},
    {0xff21, 0xff3a, 32},
};

// The digraphs with three cases (DŽ Dž dž, LJ Lj lj, NJ Nj nj, DZ Dz dz): the
// upper case; title case and lower case follow it.
int Digraph(uint32_t c) {
  for (const uint32_t upper : {0x1c4u, 0x1c7u, 0x1cau, 0x1f1u}) {
    if (c >= upper && c <= upper + 2) return static_cast<int>(upper);
  }
  return 0;
}

uint32_t Lower(uint32_t c) {
  if (const int d = Digraph(c)) return d + 2;
  for (const CaseRange& r : kCases) {
    if (c >= r.lo && c <= r.hi) return r.delta ? c + r.delta : c + ((c - r.lo) % 2 == 0);
  }
  return c;
}

uint32_t Upper(uint32_t c) {
  if (const int d = Digraph(c)) return d;
  switch (c) {  // lower-case letters whose upper case is another range's
    case 0xb5:
      return 0x39c;
    case 0x131:
      return 'I';
    case 0x17f:
      return 'S';
    case 0x3c2:
      return 0x3a3;
  }
  for (const CaseRange& r : kCases) {
    if (r.delta && c >= r.lo + r.delta && c <= r.hi + r.delta) return c - r.delta;
    if (!r.delta && c > r.lo && c <= r.hi && (c - r.lo) % 2 == 1) return c - 1;
  }
  return c;
}

bool IsTitleCp(uint32_t c) { return Digraph(c) && c == Digraph(c) + 1u; }
// ß and İ change case into two code points (SS, i + U+0307), which Lower and
// Upper cannot return.
bool IsUpperCp(uint32_t c) { return (Lower(c) != c && !IsTitleCp(c)) || c == 0x130; }
bool IsLowerCp(uint32_t c) { return (Upper(c) != c && !IsTitleCp(c)) || c == 0xdf; }
bool IsCased(uint32_t c) { return Lower(c) != c || Upper(c) != c || c == 0xdf || c == 0x130; }

// What Unicode lets sit inside a word without breaking it (apostrophes, dots,
// combining marks), which the final-sigma rule looks past.
bool IsCaseIgnorable(uint32_t c) {
  return c == '\'' || c == '.' || c == ':' || c == '^' || c == '`' || c == 0xa8 || c == 0xad || c == 0xaf ||
         c == 0xb4 || c == 0xb7 || c == 0xb8 || c == 0x2018 || c == 0x2019 || c == 0x2024 || c == 0x2027 ||
         (c >= 0x300 && c <= 0x36f);
}

// Python lowers Σ to ς at the end of a word: after a cased letter, and not
// before one.
bool FinalSigma(const Chars& c, size_t k) {
  size_t j = k;
  while (j > 0 && IsCaseIgnorable(c[j - 1])) --j;
  if (j == 0 || !IsCased(c[j - 1])) return false;
  j = k + 1;
  while (j < c.size() && IsCaseIgnorable(c[j])) ++j;
  return j == c.size() || !IsCased(c[j]);
}

// Each code point's case changed as `to` says (0 lower, 1 upper, 2 title
// case: title case after an uncased letter, else lower; 3 capitalize); the
// bytes written for a code point keep the origin of its first byte.
Text ChangeCase(const Text& t, int to) {
  const Chars c(t);
  Text out;
  bool after_cased = false;
  for (size_t k = 0; k < c.size(); ++k) {
    const uint32_t x = c[k];
    const bool up = to == 1, title = (to == 2 && !after_cased) || (to == 3 && k == 0);
    const size_t before = out.s.size();
    const uint32_t y = up || title ? (title && Digraph(x) ? Digraph(x) + 1 : Upper(x))
                                   : (x == 0x3a3 && FinalSigma(c, k) ? 0x3c2 : Lower(x));
    if ((up || title) && x == 0xdf) {
      out.s += up ? "SS" : "Ss";
    } else if (!up && !title && x == 0x130) {
      out.s += "i\u0307";
    } else if (y == x) {
      out.s.append(t.s, c.at[k], c.at[k + 1] - c.at[k]);  // as it was, even if not UTF-8
    } else {
      AppendUtf8(y, out.s);
    }
    out.from_data.append(out.s.size() - before, t.from_data[c.at[k]]);
    after_cased = IsCased(x);
  }
  return out;
}

// Python's isdigit: ASCII's, the decimal digits of the scripts chat data
// holds most, superscripts and subscripts.
bool IsDigitCp(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  static constexpr uint32_t kZeros[] = {0x660, 0x6f0, 0x7c0,  0x966,  0x9e6,  0xa66, 0xae6,
                                        0xb66, 0xbe6, 0xc66,  0xce6,  0xd66,  0xde6, 0xe50,
                                        0xed0, 0xf20, 0x1040, 0x17e0, 0x1810, 0xff10};
  for (const uint32_t zero : kZeros) {
    if (c >= zero && c <= zero + 9) return true;
  }
  return c == 0xb2 || c == 0xb3 || c == 0xb9 || c == 0x2070 || (c >= 0x2074 && c <= 0x2079) ||
         (c >= 0x2080 && c <= 0x2089);
}

// Letters: ASCII's, cased ones, and the letters of the scripts without case
// that chat data holds most (Hebrew, Arabic, Devanagari, Thai, kana, CJK,
// Hangul).
bool IsAlphaCp(uint32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  static constexpr std::pair<uint32_t, uint32_t> kLetters[] = {
      {0xaa, 0xaa},     {0xba, 0xba},     {0x5d0, 0x5ea},   {0x620, 0x64a},    {0x671, 0x6d3},
      {0x905, 0x939},   {0xe01, 0xe30},   {0x3041, 0x3096}, {0x30a1, 0x30fa},  {0x3400, 0x4dbf},
      {0x4e00, 0x9fff}, {0xac00, 0xd7a3}, {0xf900, 0xfaff}, {0x20000, 0x2fa1f}};
  for (const auto& [lo, hi] : kLetters) {
    if (c >= lo && c <= hi) return true;
  }
  return IsCased(c);
}

bool IsLineBreak(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

// The longest string a method builds (as the renderer's output, by default):
// replace and join can grow a string geometrically in a loop.
constexpr size_t kMaxMethodText = 64u << 20;

void CheckMethodText(const Text& t, const std::string& what) {
  if (t.s.size() > kMaxMethodText) {
    Fail(what + ": the result is over " + std::to_string(kMaxMethodText >> 20) + " MiB");
  }
}

int64_t MethodIntArg(const Value& v, const std::string& what, int64_t absent) {
  if (v.is_undefined()) return absent;
  if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) {
    Fail(what + ": expected an integer, got " + v.TypeName());
  }
  return v.i();
}

const std::string& MethodStrArg(const Value& v, const std::string& what) {
  if (!v.is_string()) Fail(what + ": expected a string, got " + v.TypeName());
  return v.str();
}

// str.strip and its sides: `chars` None or absent strips whitespace.
Value Strip(const Value& self, const Args& a, const std::string& what, bool left, bool right) {
  a.Check(what, 1, {});
  const Value& chars = a.Get(0, "");
  const bool space = chars.is_undefined() || chars.is_none();
  std::vector<uint32_t> set;
  if (!space) {
    const Text& ct = Text::Literal(MethodStrArg(chars, what));
    const Chars cc(ct);
    for (size_t k = 0; k < cc.size(); ++k) set.push_back(cc[k]);
  }
  const auto strip = [&](uint32_t x) {
    return space ? IsPySpace(x) : std::find(set.begin(), set.end(), x) != set.end();
  };
  const Chars c(self.text());
  size_t lo = 0, hi = c.size();
  while (left && lo < hi && strip(c[lo])) ++lo;
  while (right && hi > lo && strip(c[hi - 1])) --hi;
  return Value::Str(c.Sub(lo, hi));
}

// Python's split on runs of whitespace, from the left or (rsplit) the right:
// after maxsplit pieces the rest is one piece, its outer side's whitespace kept.
List SplitSpace(const Text& t, int64_t maxsplit, bool from_right) {
  const Chars c(t);
  const int64_t n = static_cast<int64_t>(c.size());
  List out;
  if (!from_right) {
    int64_t i = 0;
    for (; maxsplit != 0; --maxsplit) {
      while (i < n && IsPySpace(c[i])) ++i;
      if (i == n) break;
      const int64_t j = i;
      while (i < n && !IsPySpace(c[i])) ++i;
      out.push_back(Value::Str(c.Sub(j, i)));
    }
    while (i < n && IsPySpace(c[i])) ++i;
    if (i < n) out.push_back(Value::Str(c.Sub(i, n)));
    return out;
  }
  int64_t i = n;  // one past the next code point to look at
  for (; maxsplit != 0; --maxsplit) {
    while (i > 0 && IsPySpace(c[i - 1])) --i;
    if (i == 0) break;
    const int64_t j = i;
    while (i > 0 && !IsPySpace(c[i - 1])) --i;
    out.push_back(Value::Str(c.Sub(i, j)));
  }
  while (i > 0 && IsPySpace(c[i - 1])) --i;
  if (i > 0) out.push_back(Value::Str(c.Sub(0, i)));
  std::reverse(out.begin(), out.end());
  return out;
}

List SplitSep(const Text& t, const std::string& sep, int64_t maxsplit, bool from_right) {
  List out;
  if (!from_right) {
    size_t from = 0;
    for (size_t at; maxsplit != 0 && (at = t.s.find(sep, from)) != std::string::npos; --maxsplit) {
      out.push_back(Value::Str(t.Sub(from, at - from)));
      from = at + sep.size();
    }
    out.push_back(Value::Str(t.Sub(from)));
    return out;
  }
  size_t end = t.s.size();
  for (size_t at;
       maxsplit != 0 && end >= sep.size() && (at = t.s.rfind(sep, end - sep.size())) != std::string::npos;
       --maxsplit) {
    out.push_back(Value::Str(t.Sub(at + sep.size(), end - at - sep.size())));
    end = at;
  }
  out.push_back(Value::Str(t.Sub(0, end)));
  std::reverse(out.begin(), out.end());
  return out;
}

Value Split(const Value& self, const Args& a, const std::string& what, bool from_right) {
  a.Check(what, 2, {"sep", "maxsplit"});
  const Value& sep = a.Get(0, "sep");
  int64_t maxsplit = MethodIntArg(a.Get(1, "maxsplit"), what, -1);
  if (maxsplit < 0) maxsplit = -1;
  if (sep.is_undefined() || sep.is_none())
    return Value::MakeList(SplitSpace(self.text(), maxsplit, from_right));
  if (MethodStrArg(sep, what).empty()) Fail(what + ": empty separator");
  return Value::MakeList(SplitSep(self.text(), sep.str(), maxsplit, from_right));
}

Value SplitLines(const Value& self, const Args& a) {
  a.Check("method splitlines", 1, {"keepends"});
  const bool keep = a.Get(0, "keepends").Truthy();
  const Chars c(self.text());
  List out;
  for (size_t k = 0; k < c.size();) {
    const size_t start = k;
    while (k < c.size() && !IsLineBreak(c[k])) ++k;
    const size_t eol = k;
    if (k < c.size()) k += (c[k] == '\r' && k + 1 < c.size() && c[k + 1] == '\n') ? 2 : 1;
    out.push_back(Value::Str(c.Sub(start, keep ? k : eol)));
  }
  return Value::MakeList(std::move(out));
}

Value StrReplace(const Value& self, const Args& a) {
  const std::string what = "method replace";
  a.Check(what, 3, {"count"});
  MethodStrArg(a.Get(0, ""), what);
  MethodStrArg(a.Get(1, ""), what);
  const Text& old = a.Get(0, "").text();
  const Text& rep = a.Get(1, "").text();
  int64_t count = MethodIntArg(a.Get(2, "count"), what, -1);
  const Text& t = self.text();
  Text out;
  if (old.s.empty()) {  // `rep` before each code point and at the end
    const Chars c(t);
    for (size_t k = 0; k <= c.size(); ++k) {
      if (count != 0) {
        out.Append(rep);
        CheckMethodText(out, what);
        --count;
      }
      if (k < c.size()) out.Append(c.Sub(k, k + 1));
    }
    return Value::Str(std::move(out));
  }
  size_t from = 0;
  for (size_t at; count != 0 && (at = t.s.find(old.s, from)) != std::string::npos; --count) {
    out.Append(t.Sub(from, at - from));
    out.Append(rep);
    CheckMethodText(out, what);
    from = at + old.s.size();
  }
  out.Append(t.Sub(from));
  return Value::Str(std::move(out));
}

// The optional start and end arguments (code points) from position `first`,
// clipped as Python's ADJUST_INDICES does: start may stay past the end.
std::pair<int64_t, int64_t> StartEnd(const Args& a, size_t first, int64_t n, const std::string& what) {
  const auto get = [&](size_t i, int64_t absent) {
    const Value& v = a.Get(i, "");
    return v.is_none() ? absent : MethodIntArg(v, what, absent);
  };
  int64_t start = get(first, 0), end = get(first + 1, n);
  if (end > n) end = n;
  if (end < 0) end = std::max<int64_t>(end + n, 0);
  if (start < 0) start = std::max<int64_t>(start + n, 0);
  return {start, end};
}

// startswith and endswith: a string or a tuple of them, within the
// optional [start, end).
Value StartsOrEnds(const Value& self, const Args& a, bool ends) {
  const std::string what = ends ? "method endswith" : "method startswith";
  a.Check(what, 3, {});
  const Value& arg = a.Get(0, "");
  if (arg.is_list() && !arg.is_tuple())
    Fail(what + ": the argument must be a string or a tuple of strings, not a list");
  const List options = arg.is_tuple() ? arg.list() : List{arg};
  const Chars c(self.text());
  const auto [start, end] = StartEnd(a, 1, static_cast<int64_t>(c.size()), what);
  for (const Value& o : options) {
    const std::string& x = MethodStrArg(o, what);
    const int64_t last =
        end - static_cast<int64_t>(Chars(o.text()).size());  // where x would start at the end
    if (last < start) continue;
    const size_t from = c.at[ends ? last : start];
    if (self.str().compare(from, x.size(), x) == 0) return Value::Bool(true);
  }
  return Value::Bool(false);
}

// find, rfind and count of a substring within the optional [start, end), in
// code points.
Value Find(const Value& self, const Args& a, const std::string& what) {
  a.Check(what, 3, {});
  const std::string& sub = MethodStrArg(a.Get(0, ""), what);
  const Chars c(self.text());
  const auto [start, end] = StartEnd(a, 1, static_cast<int64_t>(c.size()), what);
  const bool count = what == "method count";
  if (end - start < static_cast<int64_t>(Chars(a.Get(0, "").text()).size()))
    return Value::Int(count ? 0 : -1);
  const std::string_view hay = std::string_view(self.str()).substr(c.at[start], c.at[end] - c.at[start]);
  if (count) {
    if (sub.empty()) return Value::Int(end - start + 1);
    int64_t n = 0;
    for (size_t at = hay.find(sub); at != std::string::npos; at = hay.find(sub, at + sub.size())) ++n;
    return Value::Int(n);
  }
  const size_t at = what == "method find" ? hay.find(sub) : hay.rfind(sub);
  return Value::Int(at == std::string::npos ? -1 : c.IndexOf(c.at[start] + at));
}

Value StrJoin(const Value& self, const Args& a) {
  a.Check("method join", 1, {});
  const List items = Iterate(a.Get(0, ""));
  Text out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      Fail("method join: item " + std::to_string(i) + " is " + items[i].TypeName() + ", not a string");
    }
    if (i) out.Append(self.text());
    out.Append(items[i].text());
    CheckMethodText(out, "method join");
  }
  return Value::Str(std::move(out));
}

// isdigit, isalpha, ...: true when not empty and every code point is one
// (islower and isupper: every cased one, and there is one).
Value Is(const Value& self, const Args& a, const std::string& what, bool (*is)(uint32_t)) {
  a.Check(what, 0, {});
  const Chars c(self.text());
  bool any_cased = false;
  const bool cased = what == "method islower" || what == "method isupper";
  for (size_t k = 0; k < c.size(); ++k) {
    if (cased && !IsCased(c[k])) continue;
    if (!is(c[k])) return Value::Bool(false);
    any_cased = true;
  }
  return Value::Bool(c.size() > 0 && (!cased || any_cased));
}

using Method = Value (*)(const Value& self, const Args& a);

Value NoArgs(const Value& self, const Args& a, const std::string& what, int to) {
  a.Check(what, 0, {});
  return Value::Str(ChangeCase(self.text(), to));
}

const std::map<std::string_view, Method>& StrMethods() {
  static const std::map<std::string_view, Method> methods = {
      {"strip", [](const Value& s, const Args& a) { return Strip(s, a, "method strip", true, true); }},
      {"lstrip", [](const Value& s, const Args& a) { return Strip(s, a, "method lstrip", true, false); }},
      {"rstrip", [](const Value& s, const Args& a) { return Strip(s, a, "method rstrip", false, true); }},
      {"split", [](const Value& s, const Args& a) { return Split(s, a, "method split", false); }},
      {"rsplit", [](const Value& s, const Args& a) { return Split(s, a, "method rsplit", true); }},
      {"splitlines", SplitLines},
      {"startswith", [](const Value& s, const Args& a) { return StartsOrEnds(s, a, false); }},
      {"endswith", [](const Value& s, const Args& a) { return StartsOrEnds(s, a, true); }},
      {"lower", [](const Value& s, const Args& a) { return NoArgs(s, a, "method lower", 0); }},
      {"upper", [](const Value& s, const Args& a) { return NoArgs(s, a, "method upper", 1); }},
      {"title", [](const Value& s, const Args& a) { return NoArgs(s, a, "method title", 2); }},
      {"capitalize", [](const Value& s, const Args& a) { return NoArgs(s, a, "method capitalize", 3); }},
      {"replace", StrReplace},
      {"find", [](const Value& s, const Args& a) { return Find(s, a, "method find"); }},
      {"rfind", [](const Value& s, const Args& a) { return Find(s, a, "method rfind"); }},
      {"count", [](const Value& s, const Args& a) { return Find(s, a, "method count"); }},
      {"join", StrJoin},
      {"isdigit", [](const Value& s, const Args& a) { return Is(s, a, "method isdigit", IsDigitCp); }},
      {"isalpha", [](const Value& s, const Args& a) { return Is(s, a, "method isalpha", IsAlphaCp); }},
      {"isalnum",
       [](const Value& s, const Args& a) {
         return Is(s, a, "method isalnum", [](uint32_t c) { return IsAlphaCp(c) || IsDigitCp(c); });
       }},
      {"isspace", [](const Value& s, const Args& a) { return Is(s, a, "method isspace", IsPySpace); }},
      {"islower", [](const Value& s, const Args& a) { return Is(s, a, "method islower", IsLowerCp); }},
      {"isupper", [](const Value& s, const Args& a) { return Is(s, a, "method isupper", IsUpperCp); }},
  };
  return methods;
}

List DictItems(const Dict& d, int which) {  // 0 items, 1 keys, 2 values
  List out;
  out.reserve(d.items.size());
  for (const auto& [k, v] : d.items) {
    if (which == 0) out.push_back(Value::MakeTuple({Value::Str(k), v}));
    if (which == 1) out.push_back(Value::Str(k));
    if (which == 2) out.push_back(v);
  }
  return out;
}

const std::map<std::string_view, Method>& DictMethods() {
  static const std::map<std::string_view, Method> methods = {
      {"items",
       [](const Value& d, const Args& a) {
         a.Check("method items", 0, {});
         return Value::MakeList(DictItems(*d.dict(), 0));
       }},
      {"keys",
       [](const Value& d, const Args& a) {
         a.Check("method keys", 0, {});
         return Value::MakeList(DictItems(*d.dict(), 1));
       }},
      {"values",
       [](const Value& d, const Args& a) {
         a.Check("method values", 0, {});
         return Value::MakeList(DictItems(*d.dict(), 2));
       }},
      {"get",
       [](const Value& d, const Args& a) {
         a.Check("method get", 2, {});
         const Value& key = a.Get(0, "");
         if (key.is_undefined()) Fail("method get: expected a key");
         const Value* found = key.is_string() ? d.dict()->Find(key.str()) : nullptr;
         const Value& absent = a.Get(1, "");
         return found ? *found : absent.is_undefined() ? Value::None() : absent;
       }},
  };
  return methods;
}

Value Bind(const Value& obj, const std::map<std::string_view, Method>& methods, std::string_view name) {
  const auto it = methods.find(name);
  if (it == methods.end()) return Value();
  const Method m = it->second;
  return Value::MakeFunction(std::string(name), [obj, m](const Args& a) { return m(obj, a); });
}

// Python's slice bounds of a sequence of n: the first index, the step and how
// many indices it selects.
struct SliceRange {
  int64_t first, step, count;
};

bool IsBound(const Value& v) {
  return v.is_undefined() || v.is_none() || v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool;
}

SliceRange AdjustSlice(int64_t n, const Value& start, const Value& stop, const Value& step) {
  const auto bound = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    return v.i();
  };
  int64_t st = bound(step).value_or(1);
  if (st == 0) Fail("slice step cannot be zero");
  st = std::clamp<int64_t>(st, -n - 1, n + 1);  // a longer step selects the same
  const auto clip = [&](std::optional<int64_t> b, int64_t absent) {
    if (!b) return absent;
    int64_t x = *b;
    if (x < 0) x = std::max<int64_t>(x + n, st < 0 ? -1 : 0);
    return std::min(x, st < 0 ? n - 1 : n);
  };
  const int64_t first = clip(bound(start), st < 0 ? n - 1 : 0);
  const int64_t last = clip(bound(stop), st < 0 ? -1 : n);
  int64_t count = 0;
  if (st > 0 && last > first) count = (last - first - 1) / st + 1;
  if (st < 0 && first > last) count = (first - last - 1) / -st + 1;
  return {first, st, count};
}

}  // namespace

Value GetAttr(const Value& obj, std::string_view name, bool attr_first) {
  if (obj.is_undefined()) Fail("an undefined value has no attribute '" + std::string(name) + "'");
  if (obj.is_string()) return Bind(obj, StrMethods(), name);
  if (!obj.is_dict()) return Value();
  const Dict& d = *obj.dict();
  const Value* item = d.Find(name);
  if (d.is_namespace) return item ? *item : Value();  // a namespace has attributes, no methods
  if (item && !attr_first) return *item;
  Value method = Bind(obj, DictMethods(), name);
  if (!method.is_undefined()) return method;
  return item ? *item : Value();
}

Value GetIndex(const Value& obj, int64_t index) {
  if (obj.is_undefined()) Fail("an undefined value has no item " + std::to_string(index));
  if (obj.is_list()) {
    const auto n = static_cast<int64_t>(obj.list().size());
    if (index < 0) index += n;
    return index >= 0 && index < n ? obj.list()[index] : Value();
  }
  if (!obj.is_string()) return Value();
  const Chars c(obj.text());
  const auto n = static_cast<int64_t>(c.size());
  if (index < 0) index += n;
  return index >= 0 && index < n ? Value::Str(c.Sub(index, index + 1)) : Value();
}

Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) Fail("an undefined value cannot be sliced");
  // Python raises TypeError for other bounds, which Jinja's lookup turns into Undefined.
  if (!IsBound(start) || !IsBound(stop) || !IsBound(step)) return Value();
  if (obj.is_list()) {
    const List& items = obj.list();
    const SliceRange r = AdjustSlice(static_cast<int64_t>(items.size()), start, stop, step);
    List out;
    out.reserve(r.count);
    for (int64_t k = 0, i = r.first; k < r.count; ++k, i += r.step) out.push_back(items[i]);
    return Value::MakeList(std::move(out));
  }
  if (!obj.is_string()) return Value();
  const Chars c(obj.text());
  const SliceRange r = AdjustSlice(static_cast<int64_t>(c.size()), start, stop, step);
  if (r.step == 1) return Value::Str(c.Sub(r.first, r.first + r.count));
  Text out;
  for (int64_t k = 0, i = r.first; k < r.count; ++k, i += r.step) out.Append(c.Sub(i, i + 1));
  return Value::Str(std::move(out));
}

}  // namespace burst::jinja
