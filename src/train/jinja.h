// Burst's Jinja: the part of Jinja2 that models' chat templates are written
// in, parsed and rendered as transformers' apply_chat_template runs them
// (an immutable sandbox with trim_blocks, lstrip_blocks, loop controls and
// the {% generation %} block).
//
// Statements: if/elif/else, for (tuple targets, an `if` filter, else, loop.*
// and loop.cycle), set (names, tuples, namespace attributes, set blocks),
// macro (positional and keyword parameters with defaults), break,
// continue, generation, comments and whitespace control. Expressions:
// Python literals, lists, tuples, dicts, attributes, items, slices, calls,
// filters, tests, arithmetic, comparisons, `in`, `~`, `and`/`or`/`not`,
// conditional expressions. Globals: range, namespace, dict,
// raise_exception and what the caller passes. Filters and tests:
// jinja_builtins.h. Anything else is refused when parsing, naming the
// line and the construct, never rendered approximately.
//
// Bounded for templates from outside: nesting depth, loop iterations and
// output size are limited (RenderOptions); exceeding one is an error.
//
// Thread-safety: a parsed Template is immutable; Render may run on several
// threads at once. Errors: burst::Error kInvalidArgument with param `where`
// and the message "WHERE line N: ...".
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "train/jinja_value.h"

namespace burst::jinja {

struct Template;

// Parses a template's source. `where` names it in errors ("chat_template").
std::shared_ptr<const Template> Parse(std::string_view source, const std::string& where);

struct RenderOptions {
  size_t max_output = 64u << 20;  // bytes
  int64_t max_steps = 1'000'000;  // loop iterations and macro calls together
  // Dicts whose output is attributed: while a `for` walks one of them (the
  // innermost such loop wins), what is written is owned by its index here.
  std::vector<const Dict*> owners;
};

struct Rendered {
  Text text;
  std::vector<int> owner;  // per byte: an index into RenderOptions::owners, or -1
};

// Renders with `context` as the template's variables.
Rendered Render(const Template& t, const Dict& context, const RenderOptions& options);

// JSON as Jinja values, every string marked as data.
Value FromJson(const Json& j);

}  // namespace burst::jinja
