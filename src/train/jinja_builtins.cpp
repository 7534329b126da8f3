// Jinja2 3.1's filters and tests (jinja_builtins.h): the filters' registry, the tests, and the
// helpers the filters share (jinja_internal.h); the filters are in jinja_filters.cpp and
// jinja_numbers.cpp, GetAttr, GetIndex, Slice and the str and dict methods in jinja_methods.cpp.
#include "train/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "train/jinja_internal.h"

namespace burst::jinja::internal {

// The helpers of jinja_internal.h that the filters share.
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

Value AsString(const Value& v) { return v.is_string() ? v : Value::Str(v.ToText()); }

Value CallMethod(const Value& obj, std::string_view name, const Args& a) {
  return GetAttr(obj, name, true).Call(a);
}

Value GetPath(Value item, const Value& attribute, const Value& fallback) {
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

List Items(const Value& v, const std::string& what) {
  if (!v.is_list() && !v.is_string() && !v.is_dict() && !v.is_undefined()) {
    Fail(what + ": expected a list, got " + v.TypeName());
  }
  return Iterate(v);
}

namespace {

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
}  // namespace burst::jinja::internal

namespace burst::jinja {

bool HasFilter(std::string_view name) { return internal::Filters().count(name) > 0; }

bool HasTest(std::string_view name) {
  return internal::Predicates().count(internal::TestName(name)) > 0 ||
         internal::Binaries().count(internal::TestName(name)) > 0;
}

Value ApplyFilter(std::string_view name, const Value& v, const Args& args) {
  const auto it = internal::Filters().find(name);
  if (it == internal::Filters().end()) Fail("no filter named '" + std::string(name) + "'");
  return it->second(v, args, "filter " + std::string(name));
}

bool ApplyTest(std::string_view name, const Value& v, const Args& args) {
  const std::string what = "test " + std::string(name);
  if (const auto p = internal::Predicates().find(internal::TestName(name));
      p != internal::Predicates().end()) {
    args.Check(what, 0, {});
    return p->second(v);
  }
  const auto b = internal::Binaries().find(internal::TestName(name));
  if (b == internal::Binaries().end()) Fail("no test named '" + std::string(name) + "'");
  const std::string_view kw = b->second.name;
  args.Check(what, 1, kw.empty() ? std::vector<std::string_view>{} : std::vector<std::string_view>{kw});
  if (!args.Has(0, kw)) Fail(what + ": expected an argument");
  return b->second.test(v, args.Get(0, kw));
}

}  // namespace burst::jinja
