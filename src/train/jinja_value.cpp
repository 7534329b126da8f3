#include "train/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "train/jinja_internal.h"

namespace burst::jinja {

// UTF-8 and Python's whitespace, shared with the other jinja_*.cpp
// (jinja_internal.h).
namespace internal {

// The code point of bytes [a, end) (one as CodePointStarts cut it); U+FFFD
// for bytes that are not valid UTF-8.
uint32_t CodePointAt(const std::string& s, size_t a, size_t end) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[a + i]); };
  const size_t n = end - a;
  if (n == 1) return byte(0) < 0x80 ? byte(0) : 0xfffd;
  if (n != (byte(0) < 0xe0 ? 2u : byte(0) < 0xf0 ? 3u : 4u)) return 0xfffd;  // cut short
  uint32_t c = byte(0) & (0x7f >> n);
  for (size_t i = 1; i < n; ++i) c = c << 6 | (byte(i) & 0x3f);
  return c;
}

// Python's str.isspace() for one code point (also what `\s` matches).
bool IsPySpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

}  // namespace internal

namespace {

using Kind = Value::Kind;

// Containers nest at most this deep in repr(), tojson and comparisons, and
// the text those build stays under kMaxBuilt bytes: a template can put a list
// in itself in a loop, or the same list in another many times over.
constexpr int kMaxDepth = 256;
constexpr size_t kMaxBuilt = 64u << 20;

const Value kUndefined;

void CheckDepth(int depth) {
  if (depth > kMaxDepth) Fail("values nested more than " + std::to_string(kMaxDepth) + " deep");
}
void CheckSize(const std::string& out) {
  if (out.size() > kMaxBuilt) Fail("a value printed as over " + std::to_string(kMaxBuilt >> 20) + " MiB");
}

// Python's str.isprintable() for a code point over 0x7f, which repr()
// escapes when false: controls, separators, format and private-use ranges.
bool IsPrintable(uint32_t c) {
  static constexpr std::pair<uint32_t, uint32_t> kNot[] = {
      {0x80, 0xa0},     {0xad, 0xad},     {0x600, 0x605},     {0x61c, 0x61c},     {0x6dd, 0x6dd},
      {0x70f, 0x70f},   {0x1680, 0x1680}, {0x180e, 0x180e},   {0x2000, 0x200f},   {0x2028, 0x202f},
      {0x205f, 0x2064}, {0x2066, 0x206f}, {0x3000, 0x3000},   {0xd800, 0xf8ff},   {0xfeff, 0xfeff},
      {0xfff9, 0xfffb}, {0xfffe, 0xffff}, {0xe0000, 0xe0fff}, {0xf0000, 0x10ffff}};
  for (const auto& [lo, hi] : kNot) {
    if (c >= lo && c <= hi) return false;
  }
  return c <= 0x10ffff;
}

std::string Hex(const char* prefix, uint32_t c, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%s%0*x", prefix, digits, c);
  return buf;
}

// Python's repr() of a str.
void QuoteTo(const std::string& s, std::string& out) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  out += q;
  const std::vector<size_t> starts = CodePointStarts(s);
  for (size_t k = 0; k + 1 < starts.size(); ++k) {
    const size_t a = starts[k], end = starts[k + 1];
    const uint32_t c = internal::CodePointAt(s, a, end);
    if (c == static_cast<uint32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += Hex("\\x", c, 2);
    } else if (c < 0x80 || (c == 0xfffd && end - a == 1) || IsPrintable(c)) {
      out.append(s, a, end - a);  // also a byte that is not UTF-8, as it is
    } else {
      out += c <= 0xff ? Hex("\\x", c, 2) : c <= 0xffff ? Hex("\\u", c, 4) : Hex("\\U", c, 8);
    }
  }
  out += q;
}

void ReprTo(const Value& v, std::string& out, int depth) {
  CheckDepth(depth);
  switch (v.kind()) {
    case Kind::kString:
      QuoteTo(v.str(), out);
      break;
    case Kind::kList: {
      out += v.is_tuple() ? '(' : '[';
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) out += ", ";
        ReprTo(v.list()[i], out, depth + 1);
        CheckSize(out);
      }
      if (v.is_tuple() && v.list().size() == 1) out += ',';
      out += v.is_tuple() ? ')' : ']';
      break;
    }
    case Kind::kDict: {
      const Dict& d = *v.dict();
      if (d.is_namespace) out += "<Namespace ";
      out += '{';
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += ", ";
        QuoteTo(d.items[i].first.s, out);
        out += ": ";
        ReprTo(d.items[i].second, out, depth + 1);
        CheckSize(out);
      }
      out += '}';
      if (d.is_namespace) out += '>';
      break;
    }
    default:
      out += v.is_undefined() ? "Undefined" : v.ToText().s;
  }
}

// -1, 0 or 1 as a is below, equal to or above b, exactly (Python compares an
// int with a float without rounding either); b is not NaN.
int CompareIntFloat(int64_t a, double b) {
  if (b >= 9223372036854775808.0) return -1;
  if (b < -9223372036854775808.0) return 1;
  const double t = std::trunc(b);
  const auto bi = static_cast<int64_t>(t);
  if (a != bi) return a < bi ? -1 : 1;
  return t == b ? 0 : (b > t ? -1 : 1);
}

// -1, 0, 1, or 2 when unordered (a NaN).
int CompareNumbers(const Value& a, const Value& b) {
  const bool af = a.kind() == Kind::kFloat, bf = b.kind() == Kind::kFloat;
  if (!af && !bf) return a.i() < b.i() ? -1 : a.i() > b.i();
  if ((af && std::isnan(a.f())) || (bf && std::isnan(b.f()))) return 2;
  if (af && bf) return a.f() < b.f() ? -1 : a.f() > b.f();
  return af ? -CompareIntFloat(b.i(), a.f()) : CompareIntFloat(a.i(), b.f());
}

bool EqualAt(const Value& a, const Value& b, int depth) {
  CheckDepth(depth);
  if (a.is_number() && b.is_number()) return CompareNumbers(a, b) == 0;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      const List &x = a.list(), &y = b.list();
      if (a.is_tuple() != b.is_tuple()) return false;  // Python: (1,) != [1]
      if (&x == &y) return true;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!EqualAt(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const Dict &x = *a.dict(), &y = *b.dict();
      if (&x == &y) return true;
      if (x.is_namespace || y.is_namespace || x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.Find(k.s);
        if (!other || !EqualAt(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Kind::kFunction:  // Python compares callables by identity, which a Value does not show
      return a.function_name() == b.function_name();
    default:
      return false;
  }
}

bool LessAt(const Value& a, const Value& b, int depth) {
  CheckDepth(depth);
  if (a.is_number() && b.is_number()) return CompareNumbers(a, b) == -1;
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 bytes sort as code points
  if (a.is_list() && b.is_list()) {
    const List &x = a.list(), &y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!EqualAt(x[i], y[i], depth + 1)) return LessAt(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined()) Fail("cannot compare an undefined value");
  Fail(std::string("'<' not supported between ") + a.TypeName() + " and " + b.TypeName());
}

void JsonString(const std::string& s, std::string& out) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += Hex("\\u", c, 4);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

struct JsonStyle {
  int indent;
  const std::string& item_sep;
  const std::string& key_sep;
  bool sort_keys;
};

// Python's json encoder: a newline and `indent` spaces per level before each
// item and before the closing bracket when indenting; "[]" and "{}" when empty.
void JsonTo(const Value& v, const JsonStyle& st, int depth, std::string& out) {
  CheckDepth(depth);
  const auto open = [&](char bracket, size_t n) {
    out += bracket;
    if (st.indent >= 0 && n) out += '\n' + std::string(static_cast<size_t>(st.indent) * (depth + 1), ' ');
  };
  const auto separate = [&] {
    out += st.item_sep;
    if (st.indent >= 0) out += '\n' + std::string(static_cast<size_t>(st.indent) * (depth + 1), ' ');
  };
  const auto close = [&](char bracket, size_t n) {
    if (st.indent >= 0 && n) out += '\n' + std::string(static_cast<size_t>(st.indent) * depth, ' ');
    out += bracket;
  };
  switch (v.kind()) {
    case Kind::kNone:
      out += "null";
      break;
    case Kind::kBool:
      out += v.b() ? "true" : "false";
      break;
    case Kind::kInt:
      out += std::to_string(v.i());
      break;
    case Kind::kFloat:
      if (std::isnan(v.f())) {
        out += "NaN";
      } else if (std::isinf(v.f())) {
        out += v.f() < 0 ? "-Infinity" : "Infinity";
      } else {
        out += FloatRepr(v.f());
      }
      break;
    case Kind::kString:
      JsonString(v.str(), out);
      break;
    case Kind::kList: {
      const List& items = v.list();
      open('[', items.size());
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) separate();
        JsonTo(items[i], st, depth + 1, out);
        CheckSize(out);
      }
      close(']', items.size());
      break;
    }
    case Kind::kDict: {
      std::vector<const std::pair<Text, Value>*> items;
      for (const auto& item : v.dict()->items) items.push_back(&item);
      if (st.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](auto* x, auto* y) { return x->first.s < y->first.s; });
      }
      open('{', items.size());
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) separate();
        JsonString(items[i]->first.s, out);
        out += st.key_sep;
        JsonTo(items[i]->second, st, depth + 1, out);
        CheckSize(out);
      }
      close('}', items.size());
      break;
    }
    default:
      Fail(std::string("tojson: a value of type ") + v.TypeName() + " is not JSON serializable");
  }
}

}  // namespace

void Fail(const std::string& message) { throw TemplateError(message); }

Text Text::Literal(std::string s) {
  Text t;
  t.from_data.assign(s.size(), '\0');
  t.s = std::move(s);
  return t;
}

Text Text::Data(std::string s) {
  Text t;
  t.from_data.assign(s.size(), '\1');
  t.s = std::move(s);
  return t;
}

void Text::Append(const Text& o) {
  s += o.s;
  from_data += o.from_data;
}

void Text::Append(std::string_view literal) {
  s += literal;
  from_data.append(literal.size(), '\0');
}

Text Text::Sub(size_t pos, size_t n) const {
  pos = std::min(pos, s.size());
  return Text{s.substr(pos, n), from_data.substr(pos, n)};
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.s == key) return &v;
  }
  return nullptr;
}

void Dict::Set(Text key, Value v) {
  for (auto& item : items) {
    if (item.first.s == key.s) {
      item.second = std::move(v);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(v));
}

const Value& Args::Get(size_t i, std::string_view name) const {
  const Value* named = nullptr;
  for (const auto& [k, v] : kw) {
    if (k == name) named = &v;
  }
  if (i < pos.size()) {
    if (named) Fail("argument '" + std::string(name) + "' given both by position and by name");
    return pos[i];
  }
  return named ? *named : kUndefined;
}

bool Args::Has(size_t i, std::string_view name) const {
  if (i < pos.size()) return true;
  return std::any_of(kw.begin(), kw.end(), [&](const auto& p) { return p.first == name; });
}

void Args::Check(std::string_view what, size_t max_pos, const std::vector<std::string_view>& names) const {
  if (pos.size() > max_pos) {
    Fail(std::string(what) + ": takes at most " + std::to_string(max_pos) + " positional argument" +
         (max_pos == 1 ? "" : "s") + ", got " + std::to_string(pos.size()));
  }
  for (const auto& [k, v] : kw) {
    if (std::find(names.begin(), names.end(), k) == names.end()) {
      Fail(std::string(what) + ": unexpected keyword argument '" + k + "'");
    }
  }
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  v.i_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}

Value Value::Str(Text t) {
  t.from_data.resize(t.s.size(), '\1');  // a mismatched Text counts as data
  Value v;
  v.kind_ = Kind::kString;
  v.text_ = std::make_shared<const Text>(std::move(t));
  return v;
}

// How deeply `item` nests, refusing a namespace inside a list or dict: a
// namespace changes after it is made, so only kept out of containers can
// neither its depth grow unseen nor a cycle form.
static int Nesting(const Value& item) {
  if (item.is_dict() && item.dict()->is_namespace) Fail("a namespace cannot be put in a list or dict");
  return item.nesting();
}

Value Value::MakeList(List items) {
  Value v;
  v.kind_ = Kind::kList;
  for (const Value& item : items) v.nesting_ = std::max(v.nesting_, Nesting(item));
  if (++v.nesting_ > kMaxValueNesting)
    Fail("lists and dicts nested deeper than " + std::to_string(kMaxValueNesting));
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::MakeTuple(List items) {
  Value v = MakeList(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::MakeDict(std::shared_ptr<Dict> d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = d ? std::move(d) : std::make_shared<Dict>();
  for (const auto& item : v.dict_->items) v.nesting_ = std::max(v.nesting_, Nesting(item.second));
  if (++v.nesting_ > kMaxValueNesting)
    Fail("lists and dicts nested deeper than " + std::to_string(kMaxValueNesting));
  return v;
}

Value Value::MakeFunction(std::string name, Function f) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.fn_ = std::make_shared<const Function>(std::move(f));
  v.fn_name_ = std::move(name);
  return v;
}

Value Value::Call(const Args& args) const {
  if (kind_ == Kind::kUndefined) Fail("cannot call an undefined value");
  if (kind_ != Kind::kFunction) Fail(std::string("a value of type ") + TypeName() + " is not callable");
  return (*fn_)(args);
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !text_->s.empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->items.empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

Text Value::ToText() const {
  switch (kind_) {
    case Kind::kUndefined:
      return Text{};
    case Kind::kNone:
      return Text::Literal("None");
    case Kind::kBool:
      return Text::Literal(b_ ? "True" : "False");
    case Kind::kInt:
      return Text::Literal(std::to_string(i_));
    case Kind::kFloat:
      return Text::Literal(FloatRepr(f_));
    case Kind::kString:
      return *text_;
    case Kind::kList:
    case Kind::kDict:
      return Text::Data(Repr());
    case Kind::kFunction:
      return Text::Literal("<function " + fn_name_ + ">");
  }
  return Text{};
}

std::string Value::Repr() const {
  if (kind_ == Kind::kUndefined) return "Undefined";
  std::string out;
  ReprTo(*this, out, 0);
  return out;
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kFunction:
      return "function";
  }
  return "?";
}

bool Equal(const Value& a, const Value& b) { return EqualAt(a, b, 0); }

bool Less(const Value& a, const Value& b) { return LessAt(a, b, 0); }

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!item.is_string())
        Fail(std::string("'in <string>' needs a string on the left, not ") + item.TypeName());
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      return std::any_of(container.list().begin(), container.list().end(),
                         [&](const Value& x) { return Equal(x, item); });
    case Kind::kDict:
      if (item.is_list() || item.is_dict()) Fail(std::string("unhashable type: ") + item.TypeName());
      return item.is_string() && container.dict()->Find(item.str()) != nullptr;
    default:
      Fail(std::string("'in': a value of type ") + container.TypeName() + " is not a container");
  }
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return 0;
    case Kind::kString:
      return static_cast<int64_t>(CodePointStarts(v.str()).size()) - 1;
    case Kind::kList:
      return static_cast<int64_t>(v.list().size());
    case Kind::kDict:
      return static_cast<int64_t>(v.dict()->items.size());
    default:
      Fail(std::string("a value of type ") + v.TypeName() + " has no length");
  }
}

List Iterate(const Value& v) {
  List out;
  switch (v.kind()) {
    case Kind::kUndefined:
      break;
    case Kind::kString: {
      const std::vector<size_t> starts = CodePointStarts(v.str());
      out.reserve(starts.size() - 1);
      for (size_t k = 0; k + 1 < starts.size(); ++k) {
        out.push_back(Value::Str(v.text().Sub(starts[k], starts[k + 1] - starts[k])));
      }
      break;
    }
    case Kind::kList:
      out = v.list();
      break;
    case Kind::kDict:
      out.reserve(v.dict()->items.size());
      for (const auto& item : v.dict()->items) out.push_back(Value::Str(item.first));
      break;
    default:
      Fail(std::string("a value of type ") + v.TypeName() + " is not iterable");
  }
  return out;
}

std::string ToJson(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep,
                   bool sort_keys) {
  std::string out;
  JsonTo(v, JsonStyle{indent, item_sep, key_sep, sort_keys}, 0, out);
  return out;
}

// Python prints the shortest digits that read back as the same double (as
// to_chars does), in positional notation when the decimal exponent is in
// [-5, 16), with ".0" when whole, else as d.ddde+XX.
std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // "-1.5e-07", "1e+20"
  const size_t e = sci.find('e');
  const bool neg = sci[0] == '-';
  std::string digits;
  for (size_t i = neg; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exp = std::stoi(sci.substr(e + 1));
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int a = std::abs(exp);
    out += std::string(exp < 0 ? "e-" : "e+") + (a < 10 ? "0" : "") + std::to_string(a);
  } else if (exp < 0) {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else if (digits.size() <= static_cast<size_t>(exp) + 1) {
    out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
  }
  return out;
}

// A lead byte claims as many continuation bytes as it announces and finds; any
// other byte stands alone, so every byte belongs to exactly one code point.
std::vector<size_t> CodePointStarts(const std::string& s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    out.push_back(i);
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf8 ? 4 : 1;
    size_t k = 1;
    while (k < n && i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80) ++k;
    i += k;
  }
  out.push_back(s.size());
  return out;
}

}  // namespace burst::jinja
