// Jinja2 3.1's filters and tests (jinja_builtins.h); GetAttr, GetIndex, Slice
// and the str and dict methods are in jinja_methods.cpp.
#include "train/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <unordered_set>

namespace burst::jinja {

namespace internal {  // defined in jinja_value.cpp
uint32_t CodePointAt(const std::string& s, size_t a, size_t end);
bool IsPySpace(uint32_t c);
}  // namespace internal

namespace {

using Kind = Value::Kind;
// A filter gets "filter NAME" to name itself in errors.
using Filter = Value (*)(const Value& v, const Args& a, const std::string& what);

constexpr int64_t kMaxIndent = 1000;
// The longest string a filter builds (as the renderer's output, by default).
constexpr size_t kMaxFilterText = 64u << 20;

void CheckFilterText(const Text& t, const std::string& what) {
  if (t.s.size() > kMaxFilterText) {
    Fail(what + ": the result is over " + std::to_string(kMaxFilterText >> 20) + " MiB");
  }
}

bool IsInt(const Value& v) { return v.kind() == Kind::kInt || v.kind() == Kind::kBool; }

int64_t IntArg(const Value& v, const std::string& what, int64_t absent) {
  if (v.is_undefined()) return absent;
  if (!IsInt(v)) Fail(what + ": expected an integer, got " + v.TypeName());
  return v.i();
}

const std::string& StrArg(const Value& v, const std::string& what) {
  if (!v.is_string()) Fail(what + ": expected a string, got " + v.TypeName());
  return v.str();
}

// Python's str(v) as a string value (Jinja's soft_str).
Value AsString(const Value& v) { return v.is_string() ? v : Value::Str(v.ToText()); }

Value CallMethod(const Value& obj, std::string_view name, Args a = {}) {
  return GetAttr(obj, name, true).Call(a);
}

// Jinja's ignore_case: strings lowered, anything else as it is.
Value IgnoreCase(const Value& v) { return v.is_string() ? CallMethod(v, "lower") : v; }

// Jinja's attribute getter: "a.b.0" looks up a, then b, then item 0 (an
// all-digit part is an index), each as `x[part]`; `fallback` replaces an
// undefined step. No attribute gives the item itself.
Value GetPath(Value item, const Value& attribute, const Value& fallback = Value()) {
  const auto step = [&](const Value& next) {
    item = next.is_undefined() && !fallback.is_undefined() && !fallback.is_none() ? fallback : next;
  };
  if (attribute.is_undefined() || attribute.is_none()) return item;
  if (IsInt(attribute)) {
    step(GetIndex(item, attribute.i()));
    return item;
  }
  const std::string& path = StrArg(attribute, "attribute");
  for (size_t from = 0;;) {
    const size_t dot = std::min(path.find('.', from), path.size());
    const std::string part = path.substr(from, dot - from);
    const bool digits = !part.empty() && part.size() < 19 &&
                        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    step(digits ? GetIndex(item, std::stoll(part)) : GetAttr(item, part, false));
    if (dot == path.size()) return item;
    from = dot + 1;
  }
}

std::string StripAscii(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\n\v\f\r");
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \t\n\v\f\r") + 1 - a);
}

// Python's int(s, base) for a str: optional sign, base prefix and single
// underscores between digits, whitespace around; nullopt where Python raises.
std::optional<int64_t> ParseInt(const std::string& str, int64_t base, const std::string& what) {
  if (base != 0 && (base < 2 || base > 36)) return std::nullopt;
  const std::string s = StripAscii(str);
  if (s.empty()) return std::nullopt;
  size_t i = s[0] == '+' || s[0] == '-' ? 1 : 0;
  const bool neg = s[0] == '-';
  int64_t b = base;
  bool after_prefix = false;
  if (s.size() > i + 1 && s[i] == '0') {
    const char p = static_cast<char>(s[i + 1] | 0x20);
    const int64_t pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (pb && (base == 0 || base == pb)) {
      b = pb;
      i += 2;
      after_prefix = true;
    }
  }
  if (b == 0) {  // decimal, without leading zeros unless all are zeros
    b = 10;
    if (s[i] == '0' && s.find_first_not_of("0_", i) != std::string::npos) return std::nullopt;
  }
  constexpr uint64_t kLimit = uint64_t{1} << 63;
  uint64_t value = 0;
  size_t n = 0;
  for (; i < s.size(); ++i) {
    if (s[i] == '_') {
      if ((n == 0 && !after_prefix) || i + 1 == s.size() || s[i + 1] == '_') return std::nullopt;
      after_prefix = false;
      continue;
    }
    const char c = static_cast<char>(s[i] | 0x20);
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
    if (d >= b) return std::nullopt;
    if (value > (kLimit - d) / b) Fail(what + ": " + str + " is out of range");
    value = value * b + d;
    ++n;
  }
  if (n == 0) return std::nullopt;
  if (!neg && value == kLimit) Fail(what + ": " + str + " is out of range");
  return neg ? static_cast<int64_t>(0 - value) : static_cast<int64_t>(value);
}

// Python's float(s) for a str: decimal with optional exponent and single
// underscores between digits, or inf, infinity and nan; whitespace around.
std::optional<double> ParseFloat(const std::string& str) {
  const std::string s = StripAscii(str);
  if (s.empty()) return std::nullopt;
  size_t i = s[0] == '+' || s[0] == '-' ? 1 : 0;
  std::string word = s.substr(i);
  for (char& c : word) c = static_cast<char>(c | 0x20);
  if (word == "inf" || word == "infinity" || word == "nan") return std::strtod(s.c_str(), nullptr);
  std::string clean = s.substr(0, i);
  const auto digits = [&] {
    size_t n = 0;
    for (; i < s.size(); ++i) {
      const bool digit = s[i] >= '0' && s[i] <= '9';
      if (!digit && !(s[i] == '_' && n && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9')) break;
      if (digit) {
        clean += s[i];
        ++n;
      }
    }
    return n;
  };
  size_t n = digits();
  if (i < s.size() && s[i] == '.') {
    clean += s[i++];
    n += digits();
  }
  if (n == 0) return std::nullopt;
  if (i < s.size() && (s[i] | 0x20) == 'e') {
    clean += s[i++];
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean += s[i++];
    if (digits() == 0) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

Value TruncToInt(double d, const std::string& what) {
  if (!(d > -9223372036854775809.0 && d < 9223372036854775808.0)) {
    Fail(what + ": " + FloatRepr(d) + " is out of range");
  }
  return Value::Int(static_cast<int64_t>(d));
}

Value IntFilter(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 2, {"default", "base"});
  const Value fallback = a.Has(0, "default") ? a.Get(0, "default") : Value::Int(0);
  const int64_t base = IntArg(a.Get(1, "base"), what, 10);
  switch (v.kind()) {
    case Kind::kUndefined:
      Fail(what + ": the value is undefined");
    case Kind::kBool:
    case Kind::kInt:
      return Value::Int(v.i());
    case Kind::kFloat:
      if (std::isnan(v.f())) return fallback;
      return TruncToInt(v.f(), what);
    case Kind::kString: {
      if (const auto i = ParseInt(v.str(), base, what)) return Value::Int(*i);
      const auto d = ParseFloat(v.str());
      if (!d || !std::isfinite(*d)) return fallback;
      return TruncToInt(*d, what);
    }
    default:
      return fallback;
  }
}

Value FloatFilter(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 1, {"default"});
  const Value fallback = a.Has(0, "default") ? a.Get(0, "default") : Value::Float(0);
  if (v.is_undefined()) Fail(what + ": the value is undefined");
  if (v.is_number()) return Value::Float(v.f());
  if (!v.is_string()) return fallback;
  const auto d = ParseFloat(v.str());
  return d ? Value::Float(*d) : fallback;
}

// Jinja's title: each run between [-\s({\[<] capitalized (not str.title,
// which starts a word after any letter-less character).
Value Title(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  const Text t = v.ToText();
  const std::vector<size_t> at = CodePointStarts(t.s);
  Text out;
  for (size_t k = 0; k + 1 < at.size();) {
    const auto sep = [&](size_t i) {
      const uint32_t c = internal::CodePointAt(t.s, at[i], at[i + 1]);
      return internal::IsPySpace(c) ||
             (c < 0x80 && std::string_view("-({[<").find(static_cast<char>(c)) != std::string_view::npos);
    };
    const size_t start = k;
    const bool is_sep = sep(k);
    while (k + 1 < at.size() && sep(k) == is_sep) ++k;
    if (is_sep) {
      out.Append(t.Sub(at[start], at[k] - at[start]));
    } else {  // item[0].upper() + item[1:].lower()
      out.Append(CallMethod(Value::Str(t.Sub(at[start], at[start + 1] - at[start])), "upper").text());
      out.Append(CallMethod(Value::Str(t.Sub(at[start + 1], at[k] - at[start + 1])), "lower").text());
    }
  }
  return Value::Str(std::move(out));
}

Value First(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  if (v.is_list()) return v.list().empty() ? Value() : v.list().front();
  if (v.is_dict()) return v.dict()->items.empty() ? Value() : Value::Str(v.dict()->items.front().first);
  if (v.is_undefined()) return Value();
  if (v.is_string()) return GetIndex(v, 0);
  Fail(what + ": expected a list, got " + v.TypeName());
}

Value Last(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  if (v.is_list()) return v.list().empty() ? Value() : v.list().back();
  if (v.is_dict()) return v.dict()->items.empty() ? Value() : Value::Str(v.dict()->items.back().first);
  if (v.is_undefined()) return Value();
  if (v.is_string()) return GetIndex(v, -1);
  Fail(what + ": expected a list, got " + v.TypeName());
}

// Iterate() for a filter that takes a list (or a string, dict or Undefined).
List Items(const Value& v, const std::string& what) {
  if (!v.is_list() && !v.is_string() && !v.is_dict() && !v.is_undefined()) {
    Fail(what + ": expected a list, got " + v.TypeName());
  }
  return Iterate(v);
}

Value JoinFilter(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 2, {"d", "attribute"});
  const Text sep = a.Get(0, "d").ToText();
  const Value& attribute = a.Get(1, "attribute");
  Text out;
  const List items = Items(v, what);
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out.Append(sep);
    out.Append(GetPath(items[i], attribute).ToText());
    CheckFilterText(out, what);
  }
  return Value::Str(std::move(out));
}

Value Default(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 2, {"default_value", "boolean"});
  if (v.is_undefined() || (a.Get(1, "boolean").Truthy() && !v.Truthy())) {
    return a.Has(0, "default_value") ? a.Get(0, "default_value") : Value::Literal("");
  }
  return v;
}

// select, reject, selectattr, rejectattr: ([attribute,] [test, test args...]);
// keywords go to the test; no test means the item's truth.
Value Select(const Value& v, const Args& a, const std::string& what) {
  const bool keep = what == "filter select" || what == "filter selectattr";
  const bool attr = what == "filter selectattr" || what == "filter rejectattr";
  if (!v.Truthy()) return Value::MakeList({});
  if (attr && a.pos.empty()) Fail(what + ": missing the attribute name");
  const size_t off = attr ? 1 : 0;
  std::string test;
  Args test_args;
  if (a.pos.size() > off) {
    test = StrArg(a.pos[off], what);
    if (!HasTest(test)) Fail(what + ": no test named '" + test + "'");
    test_args.pos.assign(a.pos.begin() + off + 1, a.pos.end());
    test_args.kw = a.kw;
  }
  List out;
  for (const Value& item : Items(v, what)) {
    const Value x = attr ? GetPath(item, a.pos[0]) : item;
    if ((test.empty() ? x.Truthy() : ApplyTest(test, x, test_args)) == keep) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

// map(attribute=..., default=...) or map(filter, args...).
Value Map(const Value& v, const Args& a, const std::string& what) {
  if (!v.Truthy()) return Value::MakeList({});
  const bool by_attribute = a.pos.empty() && a.Has(SIZE_MAX, "attribute");
  if (by_attribute) a.Check(what, 0, {"attribute", "default"});
  if (!by_attribute && a.pos.empty()) Fail(what + ": expected a filter name or attribute=");
  const std::string name = by_attribute ? "" : StrArg(a.pos[0], what);
  if (!by_attribute && !HasFilter(name)) Fail(what + ": no filter named '" + name + "'");
  Args filter_args;
  if (!by_attribute) {
    filter_args.pos.assign(a.pos.begin() + 1, a.pos.end());
    filter_args.kw = a.kw;
  }
  List out;
  for (const Value& item : Items(v, what)) {
    out.push_back(by_attribute ? GetPath(item, a.Get(SIZE_MAX, "attribute"), a.Get(SIZE_MAX, "default"))
                               : ApplyFilter(name, item, filter_args));
  }
  return Value::MakeList(std::move(out));
}

Value ItemsFilter(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  if (v.is_undefined()) return Value::MakeList({});
  if (!v.is_dict()) Fail(what + ": expected a dict, got " + v.TypeName());
  return CallMethod(v, "items");
}

Value ReplaceFilter(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 3, {"old", "new", "count"});
  Args m;
  m.pos = {AsString(a.Get(0, "old")), AsString(a.Get(1, "new"))};
  const Value& count = a.Get(2, "count");
  if (!count.is_undefined() && !count.is_none()) m.pos.push_back(Value::Int(IntArg(count, what, -1)));
  return CallMethod(AsString(v), "replace", m);
}

// json.dumps(ensure_ascii=True) writes DEL and each non-ASCII code point as
// \uXXXX (a surrogate pair above U+FFFF); they only occur inside strings.
std::string EscapeNonAscii(const std::string& json) {
  std::string out;
  const std::vector<size_t> at = CodePointStarts(json);
  for (size_t k = 0; k + 1 < at.size(); ++k) {
    uint32_t c = internal::CodePointAt(json, at[k], at[k + 1]);
    char buf[16];
    if (c < 0x7f) {
      out += static_cast<char>(c);
    } else if (c < 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      c -= 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (c >> 10), 0xdc00 + (c & 0x3ff));
      out += buf;
    }
  }
  return out;
}

// transformers' tojson: json.dumps(x, ensure_ascii, indent, separators, sort_keys).
Value ToJsonFilter(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  const Value& ind = a.Get(1, "indent");
  int64_t indent = -1;
  if (!ind.is_undefined() && !ind.is_none()) {
    indent = std::max<int64_t>(IntArg(ind, what + " indent", 0), 0);
    if (indent > kMaxIndent) {
      Fail(what + ": indent " + std::to_string(indent) + " is over " + std::to_string(kMaxIndent));
    }
  }
  std::string item_sep = indent < 0 ? ", " : ",", key_sep = ": ";
  const Value& seps = a.Get(2, "separators");
  if (!seps.is_undefined() && !seps.is_none()) {
    if (!seps.is_list() || seps.list().size() != 2) Fail(what + ": separators must be a pair of strings");
    item_sep = StrArg(seps.list()[0], what + " separators");
    key_sep = StrArg(seps.list()[1], what + " separators");
  }
  std::string json = ToJson(v, static_cast<int>(indent), item_sep, key_sep, a.Get(3, "sort_keys").Truthy());
  if (a.Get(0, "ensure_ascii").Truthy()) json = EscapeNonAscii(json);
  return Value::Str(Text::Data(std::move(json)));
}

// The key of each item that sort, unique, min, max and dictsort compare:
// `attribute` (sort: comma-separated, a list of keys) and lowered strings
// unless case_sensitive.
Value KeyOf(const Value& item, const Value& attribute, bool case_sensitive, bool multi) {
  const auto one = [&](const Value& attr) {
    const Value k = GetPath(item, attr);
    return case_sensitive ? k : IgnoreCase(k);
  };
  if (!multi || !attribute.is_string() || attribute.str().find(',') == std::string::npos) {
    return one(attribute);
  }
  List keys;
  const std::string& s = attribute.str();
  for (size_t from = 0;;) {
    const size_t comma = std::min(s.find(',', from), s.size());
    keys.push_back(one(Value::Literal(s.substr(from, comma - from))));
    if (comma == s.size()) return Value::MakeList(std::move(keys));
    from = comma + 1;
  }
}

// Python's sorted(): stable, and reverse keeps equal items in order.
List SortedBy(const List& items, const List& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? Less(keys[y], keys[x]) : Less(keys[x], keys[y]);
  });
  List out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(items[i]);
  return out;
}

Value Sort(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 3, {"reverse", "case_sensitive", "attribute"});
  const List items = Items(v, what);
  List keys;
  for (const Value& item : items) {
    keys.push_back(KeyOf(item, a.Get(2, "attribute"), a.Get(1, "case_sensitive").Truthy(), true));
  }
  return Value::MakeList(SortedBy(items, keys, a.Get(0, "reverse").Truthy()));
}

Value DictSort(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 3, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) Fail(what + ": expected a dict, got " + v.TypeName());
  const Value& by = a.Get(1, "by");
  const std::string by_s = by.is_undefined() ? "key" : StrArg(by, what);
  if (by_s != "key" && by_s != "value") Fail(what + ": by must be \"key\" or \"value\"");
  const List items = CallMethod(v, "items").list();
  List keys;
  for (const Value& item : items) {
    keys.push_back(
        KeyOf(item.list()[by_s == "key" ? 0 : 1], Value(), a.Get(0, "case_sensitive").Truthy(), false));
  }
  return Value::MakeList(SortedBy(items, keys, a.Get(2, "reverse").Truthy()));
}

// A hashable value as a string equal for values Python's == finds equal
// (1, 1.0 and True are one key), for unique's set.
std::string HashKey(const Value& k, const std::string& what) {
  switch (k.kind()) {
    case Kind::kString:
      return "s" + k.str();
    case Kind::kBool:
    case Kind::kInt:
      return "i" + std::to_string(k.i());
    case Kind::kFloat:
      if (k.f() == std::trunc(k.f()) && std::fabs(k.f()) < 9.2e18) {
        return "i" + std::to_string(static_cast<int64_t>(k.f()));
      }
      return "f" + FloatRepr(k.f());
    case Kind::kFunction:
      return "c" + k.function_name();
    case Kind::kNone:
    case Kind::kUndefined:
      return k.TypeName();
    default:
      Fail(what + ": unhashable type: " + k.TypeName());
  }
}

Value Unique(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 2, {"case_sensitive", "attribute"});
  List out;
  std::unordered_set<std::string> seen;
  for (const Value& item : Items(v, what)) {
    const Value key = KeyOf(item, a.Get(1, "attribute"), a.Get(0, "case_sensitive").Truthy(), false);
    if (seen.insert(HashKey(key, what)).second) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

Value MinMax(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 2, {"case_sensitive", "attribute"});
  const List items = Items(v, what);
  if (items.empty()) return Value();
  List keys;
  for (const Value& item : items) {
    keys.push_back(KeyOf(item, a.Get(1, "attribute"), a.Get(0, "case_sensitive").Truthy(), false));
  }
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    if (what == "filter min" ? Less(keys[i], keys[best]) : Less(keys[best], keys[i])) best = i;
  }
  return items[best];
}

Value Reverse(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  if (v.is_string()) return Slice(v, Value(), Value(), Value::Int(-1));
  List items = Items(v, what);
  std::reverse(items.begin(), items.end());
  return Value::MakeList(std::move(items));
}

Value Indent(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 3, {"width", "first", "blank"});
  if (!v.is_string()) Fail(what + ": expected a string, got " + v.TypeName());
  const Value& width = a.Get(0, "width");
  Text pad;
  if (width.is_string()) {
    pad = width.text();
  } else {
    const int64_t n = IntArg(width, what + " width", 4);
    if (n > kMaxIndent) {
      Fail(what + ": width " + std::to_string(n) + " is over " + std::to_string(kMaxIndent));
    }
    pad = Text::Literal(std::string(std::max<int64_t>(n, 0), ' '));
  }
  const bool blank = a.Get(2, "blank").Truthy();
  // Python splits s + "\n" into lines and joins them with "\n"; each "\n"
  // written keeps the origin of the line break it stands for.
  Text s = v.text();
  s.Append("\n");
  Args keep;
  keep.pos.push_back(Value::Bool(true));
  const Value with_ends = CallMethod(Value::Str(s), "splitlines", keep);
  const Value lines = CallMethod(Value::Str(s), "splitlines");
  Text out;
  if (a.Get(1, "first").Truthy()) out.Append(pad);
  for (size_t i = 0; i < lines.list().size(); ++i) {
    const Text& line = lines.list()[i].text();
    if (i) {
      const Text& prev = with_ends.list()[i - 1].text();
      out.s += '\n';
      out.from_data += prev.from_data[lines.list()[i - 1].str().size()];
      if (blank || !line.s.empty()) out.Append(pad);
    }
    out.Append(line);
    CheckFilterText(out, what);
  }
  return Value::Str(std::move(out));
}

Value Abs(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  if (v.kind() == Kind::kFloat) return Value::Float(std::fabs(v.f()));
  if (!IsInt(v)) Fail(what + ": expected a number, got " + v.TypeName());
  if (v.i() == INT64_MIN) Fail(what + ": out of range");
  return Value::Int(std::llabs(v.i()));
}

Value Round(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 2, {"precision", "method"});
  const int64_t precision = IntArg(a.Get(0, "precision"), what + " precision", 0);
  const Value& m = a.Get(1, "method");
  const std::string method = m.is_undefined() ? "common" : StrArg(m, what);
  if (method != "common" && method != "ceil" && method != "floor") {
    Fail(what + ": method must be common, ceil or floor");
  }
  if (!v.is_number()) Fail(what + ": expected a number, got " + v.TypeName());
  if (method == "common" && IsInt(v)) {  // an int stays an int, rounded half to even
    if (precision >= 0) return Value::Int(v.i());
    if (precision < -18) return Value::Int(0);
    int64_t p = 1;
    for (int64_t k = 0; k < -precision; ++k) p *= 10;
    int64_t q = v.i() / p;
    const int64_t r = v.i() % p, twice = 2 * (r < 0 ? -r : r);  // r has v's sign
    if (twice > p || (twice == p && q % 2 != 0)) q += r < 0 ? -1 : 1;
    int64_t out;
    if (__builtin_mul_overflow(q, p, &out)) Fail(what + ": out of range");
    return Value::Int(out);
  }
  const double x = v.f();
  if (method == "common") {
    if (!std::isfinite(x) || precision > 330) return Value::Float(x);
    if (precision < -308) return Value::Float(std::copysign(0.0, x));
    if (precision < 0) {
      const double p = std::pow(10.0, static_cast<double>(-precision));
      return Value::Float(std::nearbyint(x / p) * p);
    }
    // printf rounds the exact binary value half to even, as Python's round does.
    std::vector<char> buf(700);
    std::snprintf(buf.data(), buf.size(), "%.*f", static_cast<int>(precision), x);
    return Value::Float(std::strtod(buf.data(), nullptr));
  }
  if (!std::isfinite(x)) Fail(what + ": cannot round " + FloatRepr(x));
  // Python's math.ceil and floor give an int, so a zero is never -0.0.
  const double p = std::pow(10.0, static_cast<double>(precision));
  return Value::Float(((method == "ceil" ? std::ceil(x * p) : std::floor(x * p)) + 0.0) / p);
}

// Python's sum(): numbers, or lists with a list to start from.
Value Add(const Value& x, const Value& y, const std::string& what) {
  if (IsInt(x) && IsInt(y)) {
    int64_t out;
    if (__builtin_add_overflow(x.i(), y.i(), &out)) Fail(what + ": out of range");
    return Value::Int(out);
  }
  if (x.is_number() && y.is_number()) return Value::Float(x.f() + y.f());
  if (x.is_list() && y.is_list()) {
    List l = x.list();
    l.insert(l.end(), y.list().begin(), y.list().end());
    return Value::MakeList(std::move(l));
  }
  Fail(what + ": cannot add " + x.TypeName() + " and " + y.TypeName());
}

Value Sum(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 2, {"attribute", "start"});
  Value total = a.Has(1, "start") ? a.Get(1, "start") : Value::Int(0);
  if (total.is_string()) Fail(what + ": cannot sum strings (use join)");
  for (const Value& item : Items(v, what)) total = Add(total, GetPath(item, a.Get(0, "attribute")), what);
  return total;
}

// Python's \w: letters, digits and '_'; beyond ASCII, whatever is not
// whitespace, punctuation or symbols.
bool IsWordChar(uint32_t c) {
  if (c < 0x80) return c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  static constexpr std::pair<uint32_t, uint32_t> kNot[] = {
      {0x80, 0xa9},     {0xab, 0xb1},     {0xb4, 0xb4},     {0xb6, 0xb8},     {0xbb, 0xbb},
      {0xbf, 0xbf},     {0xd7, 0xd7},     {0xf7, 0xf7},     {0x2c2, 0x2c5},   {0x2d2, 0x2df},
      {0x2e5, 0x2eb},   {0x2ed, 0x2ed},   {0x2ef, 0x36f},   {0x2000, 0x206f}, {0x20a0, 0x20cf},
      {0x2190, 0x2bff}, {0x3000, 0x3004}, {0x3008, 0x3020}, {0xe000, 0xf8ff}, {0xfe30, 0xfe4f},
      {0xff01, 0xff0f}, {0xff1a, 0xff20}, {0xff3b, 0xff40}, {0xff5b, 0xff65}, {0x1f000, 0x1faff}};
  for (const auto& [lo, hi] : kNot) {
    if (c >= lo && c <= hi) return false;
  }
  return !internal::IsPySpace(c);
}

Value WordCount(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  const Text t = v.ToText();
  const std::vector<size_t> at = CodePointStarts(t.s);
  int64_t n = 0;
  bool in_word = false;
  for (size_t k = 0; k + 1 < at.size(); ++k) {
    const bool w = IsWordChar(internal::CodePointAt(t.s, at[k], at[k + 1]));
    n += w && !in_word;
    in_word = w;
  }
  return Value::Int(n);
}

// markupsafe's escape: & < > " ' as entities, each keeping its character's origin.
Value Escape(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  const Text t = v.ToText();
  Text out;
  for (size_t i = 0; i < t.s.size(); ++i) {
    const char c = t.s[i];
    const char* e = c == '&'    ? "&amp;"
                    : c == '<'  ? "&lt;"
                    : c == '>'  ? "&gt;"
                    : c == '"'  ? "&#34;"
                    : c == '\'' ? "&#39;"
                                : nullptr;
    const std::string piece = e ? e : std::string(1, c);
    out.s += piece;
    out.from_data.append(piece.size(), t.from_data[i]);
  }
  return Value::Str(std::move(out));
}

// lower, upper, capitalize: the str method of the same name on str(v).
Value StrMethodFilter(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  return CallMethod(AsString(v), std::string_view(what).substr(std::string_view("filter ").size()));
}

const std::map<std::string_view, Filter>& Filters() {
  static const std::map<std::string_view, Filter> filters = {
      {"abs", Abs},
      {"capitalize", StrMethodFilter},
      {"count",
       [](const Value& v, const Args& a, const std::string& what) {
         a.Check(what, 0, {});
         return Value::Int(Length(v));
       }},
      {"d", Default},
      {"default", Default},
      {"dictsort", DictSort},
      {"e", Escape},
      {"escape", Escape},
      {"first", First},
      {"float", FloatFilter},
      {"indent", Indent},
      {"int", IntFilter},
      {"items", ItemsFilter},
      {"join", JoinFilter},
      {"last", Last},
      {"length",
       [](const Value& v, const Args& a, const std::string& what) {
         a.Check(what, 0, {});
         return Value::Int(Length(v));
       }},
      {"list",
       [](const Value& v, const Args& a, const std::string& what) {
         a.Check(what, 0, {});
         return Value::MakeList(Items(v, what));
       }},
      {"lower", StrMethodFilter},
      {"map", Map},
      {"max", MinMax},
      {"min", MinMax},
      {"reject", Select},
      {"rejectattr", Select},
      {"replace", ReplaceFilter},
      {"reverse", Reverse},
      {"round", Round},
      {"safe",
       [](const Value& v, const Args& a, const std::string& what) {
         a.Check(what, 0, {});
         return AsString(v);  // Markup(v): a string, autoescaping aside
       }},
      {"select", Select},
      {"selectattr", Select},
      {"sort", Sort},
      {"string",
       [](const Value& v, const Args& a, const std::string& what) {
         a.Check(what, 0, {});
         return AsString(v);
       }},
      {"sum", Sum},
      {"title", Title},
      {"tojson", ToJsonFilter},
      {"trim",
       [](const Value& v, const Args& a, const std::string& what) {
         a.Check(what, 1, {"chars"});
         Args m;
         if (a.Has(0, "chars")) m.pos.push_back(a.Get(0, "chars"));
         return CallMethod(AsString(v), "strip", m);
       }},
      {"unique", Unique},
      {"upper", StrMethodFilter},
      {"wordcount", WordCount},
  };
  return filters;
}

// Python's x % m, for the odd, even and divisibleby tests.
double Mod(const Value& x, const Value& m, const std::string& what) {
  if (!x.is_number() || !m.is_number())
    Fail(what + ": expected numbers, got " + x.TypeName() + " and " + m.TypeName());
  if (IsInt(x) && IsInt(m)) {
    if (m.i() == 0) Fail(what + ": division by zero");
    if (m.i() == -1) return 0;
    const int64_t r = x.i() % m.i();
    return static_cast<double>(r != 0 && (r < 0) != (m.i() < 0) ? r + m.i() : r);
  }
  if (m.f() == 0) Fail(what + ": division by zero");
  const double r = std::fmod(x.f(), m.f());
  return r != 0 && (r < 0) != (m.f() < 0) ? r + m.f() : r;
}

// The tests without arguments.
const std::map<std::string_view, bool (*)(const Value&)>& Predicates() {
  using K = Kind;
  static const std::map<std::string_view, bool (*)(const Value&)> tests = {
      {"defined", [](const Value& v) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v) { return v.is_undefined(); }},
      {"none", [](const Value& v) { return v.is_none(); }},
      {"boolean", [](const Value& v) { return v.kind() == K::kBool; }},
      {"true", [](const Value& v) { return v.kind() == K::kBool && v.b(); }},
      {"false", [](const Value& v) { return v.kind() == K::kBool && !v.b(); }},
      {"string", [](const Value& v) { return v.is_string(); }},
      {"number", [](const Value& v) { return v.is_number(); }},
      {"integer", [](const Value& v) { return v.kind() == K::kInt; }},
      {"float", [](const Value& v) { return v.kind() == K::kFloat; }},
      {"mapping", [](const Value& v) { return v.is_dict() && !v.dict()->is_namespace; }},
      // Jinja's Undefined is an empty sequence, and callable (calling it fails).
      {"iterable",
       [](const Value& v) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }},
      {"sequence",
       [](const Value& v) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }},
      {"callable", [](const Value& v) { return v.kind() == K::kFunction || v.is_undefined(); }},
      {"odd", [](const Value& v) { return Mod(v, Value::Int(2), "test odd") == 1; }},
      {"even", [](const Value& v) { return Mod(v, Value::Int(2), "test even") == 0; }},
      {"lower", [](const Value& v) { return CallMethod(AsString(v), "islower").Truthy(); }},
      {"upper", [](const Value& v) { return CallMethod(AsString(v), "isupper").Truthy(); }},
      {"filter", [](const Value& v) { return v.is_string() && HasFilter(v.str()); }},
      {"test", [](const Value& v) { return v.is_string() && HasTest(v.str()); }},
  };
  return tests;
}

// The tests of one argument, with its keyword name where Jinja gives one.
struct Binary {
  bool (*test)(const Value& v, const Value& other);
  std::string_view name;
};

const std::map<std::string_view, Binary>& Binaries() {
  static const std::map<std::string_view, Binary> tests = {
      {"eq", {[](const Value& v, const Value& o) { return Equal(v, o); }, ""}},
      {"ne", {[](const Value& v, const Value& o) { return !Equal(v, o); }, ""}},
      {"lt", {[](const Value& v, const Value& o) { return Less(v, o); }, ""}},
      {"gt", {[](const Value& v, const Value& o) { return Less(o, v); }, ""}},
      {"le", {[](const Value& v, const Value& o) { return Less(v, o) || Equal(v, o); }, ""}},
      {"ge", {[](const Value& v, const Value& o) { return Less(o, v) || Equal(v, o); }, ""}},
      {"in", {[](const Value& v, const Value& o) { return Contains(o, v); }, "seq"}},
      {"divisibleby",
       {[](const Value& v, const Value& o) { return Mod(v, o, "test divisibleby") == 0; }, "num"}},
      // Python's `is`: containers by identity; other values (which Python may
      // or may not share) by kind and value.
      {"sameas",
       {[](const Value& v, const Value& o) {
          if (v.kind() != o.kind()) return false;
          if (v.is_list()) return &v.list() == &o.list();
          if (v.is_dict()) return v.dict() == o.dict();
          return Equal(v, o);
        },
        "other"}},
  };
  return tests;
}

// The tests' other names.
std::string_view TestName(std::string_view name) {
  static const std::map<std::string_view, std::string_view> aliases = {
      {"equalto", "eq"}, {"==", "eq"}, {"!=", "ne"},       {"<", "lt"},          {">", "gt"},
      {"<=", "le"},      {">=", "ge"}, {"lessthan", "lt"}, {"greaterthan", "gt"}};
  const auto it = aliases.find(name);
  return it == aliases.end() ? name : it->second;
}

}  // namespace

bool HasFilter(std::string_view name) { return Filters().count(name) > 0; }

bool HasTest(std::string_view name) {
  return Predicates().count(TestName(name)) > 0 || Binaries().count(TestName(name)) > 0;
}

Value ApplyFilter(std::string_view name, const Value& v, const Args& args) {
  const auto it = Filters().find(name);
  if (it == Filters().end()) Fail("no filter named '" + std::string(name) + "'");
  return it->second(v, args, "filter " + std::string(name));
}

bool ApplyTest(std::string_view name, const Value& v, const Args& args) {
  const std::string what = "test " + std::string(name);
  if (const auto p = Predicates().find(TestName(name)); p != Predicates().end()) {
    args.Check(what, 0, {});
    return p->second(v);
  }
  const auto b = Binaries().find(TestName(name));
  if (b == Binaries().end()) Fail("no test named '" + std::string(name) + "'");
  const std::string_view kw = b->second.name;
  args.Check(what, 1, kw.empty() ? std::vector<std::string_view>{} : std::vector<std::string_view>{kw});
  if (!args.Has(0, kw)) Fail(what + ": expected an argument");
  return b->second.test(v, args.Get(0, kw));
}

}  // namespace burst::jinja
