// The filters, tests, globals and methods of Burst's Jinja (jinja.h): those
// of Jinja2 3.1 that chat templates use, with transformers' own tojson and
// the Python str and dict methods Jinja's sandbox lets templates call.
//
// Thread-safety: stateless. Errors: jinja::Fail (TemplateError) naming the
// filter, test or method and what was wrong with its arguments.
#pragma once

#include <string_view>

#include "train/jinja_value.h"

namespace burst::jinja {

// Whether a filter or test of that name exists (checked when parsing, so a
// template using another one is refused before it renders).
bool HasFilter(std::string_view name);
bool HasTest(std::string_view name);

// `v | name(args)`.
Value ApplyFilter(std::string_view name, const Value& v, const Args& args);
// `v is name(args)`.
bool ApplyTest(std::string_view name, const Value& v, const Args& args);

// `obj.name` (attr_first) or `obj[name]`: a dict's item, or a method of a
// str or dict bound to obj (strip, split, startswith, items, get, ...);
// Undefined when neither exists. Jinja tries the attribute first for `.`
// and the item first for `[]`.
Value GetAttr(const Value& obj, std::string_view name, bool attr_first);

// obj[index] for a list or string (negative from the end; Undefined when out
// of range) and obj[a:b:c] (Python's slicing; unset bounds are Undefined).
Value GetIndex(const Value& obj, int64_t index);
Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace burst::jinja
