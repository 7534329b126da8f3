// What the Jinja engine's source files (jinja_*.cpp) share and nothing else
// includes: UTF-8 code points and Python's whitespace, the argument checks
// and lookups of the filters, and the filters the registry names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "train/jinja_value.h"

namespace burst::jinja::internal {

using Kind = Value::Kind;

// jinja_value.cpp: the code point of bytes [a, end) (one as CodePointStarts
// cut it; U+FFFD where they are not valid UTF-8), and Python's str.isspace()
// for one code point (also what `\s` matches).
uint32_t CodePointAt(const std::string& s, size_t a, size_t end);
bool IsPySpace(uint32_t c);

// jinja_builtins.cpp: what the filters share.
// An int (a bool is one too).
bool IsInt(const Value& v);
// An integer argument (`absent` when Undefined) or a string one; Fail()s
// naming `what` otherwise.
int64_t IntArg(const Value& v, const std::string& what, int64_t absent);
const std::string& StrArg(const Value& v, const std::string& what);
// Python's str(v) as a string value (Jinja's soft_str).
Value AsString(const Value& v);
// obj.name(a...): a str or dict method.
Value CallMethod(const Value& obj, std::string_view name, const Args& a = {});
// Jinja's attribute getter: "a.b.0" looks up a, then b, then item 0 (an
// all-digit part is an index), each as `x[part]`; `fallback` replaces an
// undefined step. No attribute gives the item itself.
Value GetPath(Value item, const Value& attribute, const Value& fallback = Value());
// Iterate() for a filter that takes a list (or a string, dict or Undefined).
List Items(const Value& v, const std::string& what);

// The filters (`v | name(a)`) that the registry in jinja_builtins.cpp names;
// `what` is "filter NAME", for errors.
using Filter = Value (*)(const Value& v, const Args& a, const std::string& what);

// jinja_filters.cpp: strings and lists.
Value Default(const Value& v, const Args& a, const std::string& what);
Value DictSort(const Value& v, const Args& a, const std::string& what);
Value Escape(const Value& v, const Args& a, const std::string& what);
Value First(const Value& v, const Args& a, const std::string& what);
Value Indent(const Value& v, const Args& a, const std::string& what);
Value ItemsFilter(const Value& v, const Args& a, const std::string& what);
Value JoinFilter(const Value& v, const Args& a, const std::string& what);
Value Last(const Value& v, const Args& a, const std::string& what);
Value Map(const Value& v, const Args& a, const std::string& what);
Value MinMax(const Value& v, const Args& a, const std::string& what);
Value ReplaceFilter(const Value& v, const Args& a, const std::string& what);
Value Reverse(const Value& v, const Args& a, const std::string& what);
Value Select(const Value& v, const Args& a, const std::string& what);
Value Sort(const Value& v, const Args& a, const std::string& what);
Value StrMethodFilter(const Value& v, const Args& a, const std::string& what);
Value Title(const Value& v, const Args& a, const std::string& what);
Value ToJsonFilter(const Value& v, const Args& a, const std::string& what);
Value Unique(const Value& v, const Args& a, const std::string& what);
Value WordCount(const Value& v, const Args& a, const std::string& what);

// jinja_numbers.cpp: numbers parsed, rounded and added.
Value Abs(const Value& v, const Args& a, const std::string& what);
Value FloatFilter(const Value& v, const Args& a, const std::string& what);
Value IntFilter(const Value& v, const Args& a, const std::string& what);
Value Round(const Value& v, const Args& a, const std::string& what);
Value Sum(const Value& v, const Args& a, const std::string& what);

}  // namespace burst::jinja::internal
