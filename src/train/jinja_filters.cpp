// Jinja's filters of strings and lists (jinja_internal.h): title, escape,
// indent, tojson and the str methods as filters; first, last, join, select,
// map, sort, unique, min, max and the rest that walk a list.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "train/jinja_builtins.h"
#include "train/jinja_internal.h"

namespace burst::jinja::internal {
namespace {

constexpr int64_t kMaxIndent = 1000;
// The longest string a filter builds (as the renderer's output, by default).
constexpr size_t kMaxFilterText = 64u << 20;

void CheckFilterText(const Text& t, const std::string& what) {
  if (t.s.size() > kMaxFilterText) {
    Fail(what + ": the result is over " + std::to_string(kMaxFilterText >> 20) + " MiB");
  }
}

// Jinja's ignore_case: strings lowered, anything else as it is.
Value IgnoreCase(const Value& v) { return v.is_string() ? CallMethod(v, "lower") : v; }

// json.dumps(ensure_ascii=True) writes DEL and each non-ASCII code point as
// \uXXXX (a surrogate pair above U+FFFF); they only occur inside strings.
std::string EscapeNonAscii(const std::string& json) {
  std::string out;
  const std::vector<size_t> at = CodePointStarts(json);
  for (size_t k = 0; k + 1 < at.size(); ++k) {
    uint32_t c = CodePointAt(json, at[k], at[k + 1]);
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
  return !IsPySpace(c);
}

}  // namespace

// Jinja's title: each run between [-\s({\[<] capitalized (not str.title,
// which starts a word after any letter-less character).
Value Title(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  const Text t = v.ToText();
  const std::vector<size_t> at = CodePointStarts(t.s);
  Text out;
  for (size_t k = 0; k + 1 < at.size();) {
    const auto sep = [&](size_t i) {
      const uint32_t c = CodePointAt(t.s, at[i], at[i + 1]);
      return IsPySpace(c) ||
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

Value WordCount(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  const Text t = v.ToText();
  const std::vector<size_t> at = CodePointStarts(t.s);
  int64_t n = 0;
  bool in_word = false;
  for (size_t k = 0; k + 1 < at.size(); ++k) {
    const bool w = IsWordChar(CodePointAt(t.s, at[k], at[k + 1]));
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

}  // namespace burst::jinja::internal
