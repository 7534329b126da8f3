// The parsed form of a Jinja template (jinja.h): expressions and statements
// as jinja_parse.cpp builds them and jinja_render.cpp walks them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "train/jinja_value.h"

namespace burst::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kAttr,     // kids[0].name
    kItem,     // kids[0][kids[1]]
    kSlice,    // kids[0][kids[1]:kids[2]:kids[3]], unset bounds null
    kCall,     // kids[0](kids[1..])
    kFilter,   // kids[0] | name(kids[1..])
    kTest,     // kids[0] is [not] name(kids[1..])
    kUnary,    // name (not, -, +) kids[0]
    kBinary,   // kids[0] name kids[1] (and, or, +, ==, in, not in, ...)
    kCompare,  // kids[0] ops[0] kids[1] ops[1] kids[2] ... (Python's chained comparisons)
    kCond,     // kids[0] if kids[1] else kids[2] (kids[2] null without else)
    kList,     // [kids...] (tuples too)
    kDict,     // {kids[0]: kids[1], ...}
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> kids;
  // kCall, kFilter, kTest: the last kw_names.size() arguments are keywords.
  std::vector<std::string> kw_names;
  std::vector<std::string> ops;  // kCompare
  bool negated = false;          // kTest
};

struct Node {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches, else_body
    kFor,       // targets in expr [if filter]: body, else_body
    kSet,       // targets (one name, or several to unpack) = expr; or targets[0].attr = expr
    kSetBlock,  // {% set targets[0] %}body{% endset %}
    kMacro,     // {% macro targets[0](params=defaults) %}body{% endmacro %}
    kBreak,
    kContinue,
    kBlock,  // {% generation %}body{% endgeneration %}: renders its body
  };
  Kind kind = Kind::kText;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string attr;
  std::vector<std::pair<ExprPtr, std::vector<Node>>> branches;
  std::vector<Node> body, else_body;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // per param, null without a default
};

struct Template {
  std::string where;
  std::vector<Node> body;
};

}  // namespace burst::jinja
