// Burst's Jinja without Python: constructs it refuses when parsing (naming
// the line), the limits on steps, output and nesting, the data/template
// origin of every output byte, and the owners of output in a `for`.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "train/jinja.h"
#include "train/jinja_test_util.h"

namespace burst::jinja_test {
namespace {

// Parse's error for `source`, which must be refused.
std::string ParseError(const std::string& source) {
  try {
    jinja::Parse(source, "t");
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "parsed: " << source;
  return "";
}

// What Jinja2 can do but a chat template has no use for (a loader, blocks,
// call blocks), filters and tests Burst does not have, and syntax errors are
// refused before rendering, naming the offending line.
TEST(JinjaParse, RefusesWhatItDoesNotRenderNamingTheLine) {
  const std::vector<std::pair<std::string, int>> bad = {
      {"a\n{{ x | nosuchfilter }}", 2},
      {"a\nb\n{% if x is nosuchtest %}{% endif %}", 3},
      {"{% if true %}\n{% include 'other.jinja' %}\n{% endif %}", 2},
      {"\n\n\n{% extends 'base.jinja' %}", 4},
      {"x\n{% import 'macros.jinja' as m %}", 2},
      {"{% macro f() %}{{ caller() }}{% endmacro %}\n{% call f() %}x{% endcall %}", 2},
      {"a\n{{ 1 + }}", 2},
      {"a\nb\n{% for x in %}{% endfor %}", 3},
      {"a\n{% endif %}", 2},
      {"a\n{{ 'unterminated }}", 2},
      {"{% for x in [1] %}\n\n{% endwhile %}", 3},
  };
  for (const auto& [source, line] : bad) {
    SCOPED_TRACE(source);
    const std::string error = ParseError(source);
    EXPECT_NE(error.find("line " + std::to_string(line)), std::string::npos) << error;
  }
}

// The error of rendering `source` (with no variables), which must fail.
std::string RenderError(const std::string& source, const jinja::RenderOptions& options) {
  try {
    jinja::Render(*jinja::Parse(source, "t"), jinja::Dict{}, options);
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "rendered: " << source;
  return "";
}

// A template from outside cannot make Burst loop for hours, write gigabytes
// or overflow the stack: the limits of RenderOptions stop it with an error.
TEST(JinjaLimits, StepsOutputAndNesting) {
  // An odd limit, so that the error naming it is told from other numbers.
  jinja::RenderOptions few_steps;
  few_steps.max_steps = 777;
  std::string error =
      RenderError("{% for i in range(300) %}{% for j in range(300) %}{% endfor %}{% endfor %}", few_steps);
  EXPECT_NE(error.find("777"), std::string::npos) << "names the limit: " << error;
  // A huge range: the steps or the sandbox's range limit (Jinja2's MAX_RANGE, 100000) stop it, before a
  // billion items are built.
  error = RenderError("{% for i in range(10**9) %}{% endfor %}", few_steps);
  EXPECT_TRUE(error.find("777") != std::string::npos || error.find("100000") != std::string::npos) << error;
  // Endless recursion stops at the steps or the depth of calls, whichever
  // comes first, never at the end of the stack; within the default limits too.
  RenderError("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", few_steps);
  RenderError("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {});

  jinja::RenderOptions small;
  small.max_output = 100;
  EXPECT_EQ(jinja::Render(*jinja::Parse("{{ 'x' * 100 }}", "t"), jinja::Dict{}, small).text.s,
            std::string(100, 'x'));
  RenderError("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", small);
  RenderError("{{ 'x' * 101 }}", small);
  // A string too large to build is refused, not allocated.
  RenderError("{% set s = 'x' * 1000000000000 %}", {});

  // Nesting deeper than the parser allows is refused, not recursed into.
  for (const std::string& source :
       {"{{ " + std::string(10000, '(') + "1" + std::string(10000, ')') + " }}",
        "{{ " + std::string(10000, '[') + std::string(10000, ']') + " }}",
        "{{ " + std::string(10000, '(') + " }}", "{{ " + std::string(20000, '-') + "1 }}",
        [] {
          std::string s = "{{ ";
          for (int i = 0; i < 10000; ++i) s += "not ";
          return s + "1 }}";
        }(),
        [] {
          std::string s;
          for (int i = 0; i < 10000; ++i) s += "{% if true %}";
          for (int i = 0; i < 10000; ++i) s += "{% endif %}";
          return s;
        }()}) {
    SCOPED_TRACE(source.substr(0, 40));
    ParseError(source);
  }
}

// Long flat chains (a + a + ..., x|trim|trim|...) are trees as deep as they
// are long: refused when parsing or rendered, but never a stack overflow.
TEST(JinjaLimits, LongChainsDoNotCrash) {
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += " + 1";
  sum += " }}";
  std::string filters = "{{ 'x'";
  for (int i = 0; i < 100000; ++i) filters += "|trim";
  filters += " }}";
  for (const auto& [source, want] :
       {std::pair{sum, std::string("100001")}, std::pair{filters, std::string("x")}}) {
    SCOPED_TRACE(source.substr(0, 40));
    try {
      EXPECT_EQ(jinja::Render(*jinja::Parse(source, "t"), jinja::Dict{}, {}).text.s, want);
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), Code::kInvalidArgument) << e.what();
    }
  }
}

// Each output byte says whether it came from the data (1) or the template's
// text (0): a message's "<|im_end|>" stays data through the filters,
// concatenation and methods that chat templates put it through.
TEST(JinjaText, DataFlagsSurviveRendering) {
  jinja::Dict context;
  context.Set(jinja::Text::Literal("x"), jinja::FromJson("<|im_end|>"));
  context.Set(jinja::Text::Literal("padded"), jinja::FromJson("  <|im_end|>\n"));
  context.Set(jinja::Text::Literal("think"), jinja::FromJson("<think>r</think>\n<|im_end|>"));
  const std::string data(10, '\1');
  auto render = [&](const std::string& source) {
    SCOPED_TRACE(source);
    const jinja::Rendered r = jinja::Render(*jinja::Parse(source, "t"), context, {});
    EXPECT_EQ(r.text.s.size(), r.text.from_data.size());
    return r.text;
  };
  jinja::Text t = render("a{{ x }}b");
  EXPECT_EQ(t.s, "a<|im_end|>b");
  EXPECT_EQ(t.from_data, std::string(1, '\0') + data + std::string(1, '\0'));
  t = render("{{ padded | trim }}");
  EXPECT_EQ(t.s, "<|im_end|>");
  EXPECT_EQ(t.from_data, data);
  t = render("{{ '[' + x + ']' }}");
  EXPECT_EQ(t.s, "[<|im_end|>]");
  EXPECT_EQ(t.from_data, std::string(1, '\0') + data + std::string(1, '\0'));
  t = render("{{ think.split('</think>')[-1].lstrip('\\n') }}");
  EXPECT_EQ(t.s, "<|im_end|>");
  EXPECT_EQ(t.from_data, data);
  // The same characters written by the template are the template's.
  t = render("{{ '<|im_end|>' }}<|im_end|>");
  EXPECT_EQ(t.s, "<|im_end|><|im_end|>");
  EXPECT_EQ(t.from_data, std::string(20, '\0'));
}

// RenderOptions::owners: what is written while a `for` walks a message is
// that message's, template text and data alike; outside any, nobody's (-1).
TEST(JinjaText, OwnersFollowTheMessagesAForWalks) {
  const Json j = ParseJson(
      R"j({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})j",
      "context");
  const jinja::Dict context = Context(j);
  const jinja::List& messages = context.Find("messages")->list();
  jinja::RenderOptions options;
  for (const jinja::Value& m : messages) options.owners.push_back(m.dict().get());
  const jinja::Rendered r = jinja::Render(
      *jinja::Parse(
          "S{% for m in messages %}<{{ m.content }}>{% for c in 'ab' %}{{ c }}{% endfor %}{% endfor %}E",
          "t"),
      context, options);
  ASSERT_EQ(r.text.s, "S<hi>ab<yo>abE");
  const std::vector<int> want = {-1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, -1};
  EXPECT_EQ(r.owner, want);
}

}  // namespace
}  // namespace burst::jinja_test
