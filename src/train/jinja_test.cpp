// Burst's Jinja (jinja.h) against Jinja2 itself as transformers configures it
// for apply_chat_template (tests/reference/jinja_ref.py: transformers' own
// compiler, an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks,
// loop controls, {% generation %}, its tojson and raise_exception). A corpus
// of small templates, one or a few constructs each, covers every statement,
// expression, filter, test and method the engine has, Python's printing of
// values, the whitespace rules, and the shapes of real models' chat templates
// (ChatML, Llama 3, Qwen 3, Gemma, Mistral): Burst must render exactly
// Jinja2's text, or fail where Jinja2 raises. Here: the test and the cases
// for the language (values, expressions, statements, whitespace, syntax
// errors); the filters, tests, methods and real templates' cases are in
// jinja_corpus_test.cpp, and what needs no Python in jinja_limits_test.cpp.
#include "train/jinja.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/command_test_util.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"
#include "train/jinja_test_util.h"

namespace burst::jinja_test {
namespace {

namespace fs = std::filesystem;

const fs::path kReferenceDir = fs::path(BURST_SOURCE_DIR) / "tests/reference";

// The corpus's cases for the language: Python's printing of values,
// Undefined, operators, if, for, set, macros, whitespace control, syntax
// errors.
const std::vector<Case>& LanguageCases() {
  static const std::vector<Case> cases = {
      // Python's printing of values: None, booleans, floats as repr() writes
      // them, lists and dicts with repr()'s quotes.
      {"{{ none }}|{{ None }}|{{ true }}|{{ True }}|{{ false }}|{{ False }}"},
      {"{{ 1.0 }} {{ 0.1 }} {{ 1e20 }} {{ 1e16 }} {{ 2.5e-7 }} {{ 1.5e-5 }} {{ 123456789.0 }} {{ -0.0 }}"},
      {"{{ 0.1 + 0.2 }} {{ 3.0 * 2 }} {{ 10 / 4 }} {{ 4 / 2 }} {{ 1 / 3 }} {{ 2.0 ** 0.5 }} {{ 1e3 }}"},
      {R"j({{ [1, 'a', none, true, 1.5, [], {}] }})j"},
      {R"j({{ {'k': 'v', 'n': [1, 2], 'z': none} }})j"},
      {R"j({{ ["it's", 'say "hi"', 'a\nb', 'tab\there', "both ' and \""] }})j"},
      {R"j({{ x }} {{ x.b }} {{ f }} {{ big }})j",
       R"j({"x": {"a": 1, "b": [true, null, 2.5, "s"]}, "f": 1.0, "big": 1e300})j"},
      {R"j({{ [1, 2,] }} {{ {'a': 1,} }})j"},
      {R"j({{ 'a\tb\\c\'d"' }}|{{ "e\"f" }}|{{ 'x\ny' }})j"},
      {R"j({{ '\u00e9\x41' }})j"},
      // Undefined: prints as nothing, an attribute of it fails, and a
      // missing key or attribute of a dict (or of None) is Undefined.
      {"[{{ missing }}][{{ x.nope }}][{{ x['nope'] }}][{{ none.x }}]", R"j({"x": {"a": 1}})j"},
      {"{{ missing.attr }}"},
      {"{{ 'a' + missing }}"},
      {"{{ missing + 1 }}"},
      {"{{ missing|tojson }}"},
      {"{{ messages[0]['role'] }}", R"j({"messages": []})j"},
      {"{{ messages[-1].content if messages else '' }}|{{ messages|length > 0 }}", R"j({"messages": []})j"},
      {"{{ missing|length }} [{{ missing|trim }}] {{ missing|list }} {{ missing is string }} "
       "{{ x.tool_calls|length }} {% if x.nope is defined and x.nope.y %}no{% else %}"
       "short-circuit{% endif %}",
       R"j({"x": {"a": 1}})j"},
      {"{{ x.nope.deeper }}", R"j({"x": {"a": 1}})j"},
      {"{{ missing() }}"},
      {"{{ loop.index }}"},
      {"[{{ 'abc'['x'] }}][{{ [1, 2]['a'] }}][{{ {'a': 1}[0] }}]"},
      {"{{ missing is iterable }} {{ missing is sequence }} {{ missing is mapping }} "
       "{{ missing is callable }} {{ missing is string }} {{ missing is number }}"},
      {"[{{ x[0] }}]", R"j({"x": 5})j"},
      {"[{{ 'abc'.__class__ }}]"},
      {"{{ missing == none }} {{ missing is none }} {{ none == none }} {{ missing is undefined }}"},
      // Arithmetic, with Python's semantics: floor division and modulo
      // rounding toward minus infinity, ** binding looser than unary minus
      // in Jinja (unlike Python), filters tighter than unary minus.
      {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7 / 7 }}"},
      {"{{ 7 // 2.0 }} {{ 7.5 % 2 }} {{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} "
       "{{ 2 ** 3 ** 2 }}"},
      {"{{ 1e22 }} {{ 1e15 }} {{ 1e16 / 10 }} {{ 0.0001 }} {{ 0.00001 }} {{ 3 * 1.5 }} "
       "{{ 2.675|round(2) }} {{ 1.0 / 3 * 3 }} {{ 5e-324 }} {{ 1.7976931348623157e308 }}"},
      {"{{ 2 ** 62 }} {{ 9007199254740993 }} {{ big }} {{ big + 1 }} {{ neg // 7 }} "
       "{{ 10 // 3 * 3 + 10 % 3 }}",
       R"j({"big": 12345678901234567, "neg": -9007199254740993})j"},
      {"{{ 1 / 0 }}"},
      {"{{ 1e308 * 10 }} {{ -1e308 * 10 }} {{ (1e308 * 10)|tojson }} {{ 10 / 3 }} {{ -7 % -3 }} "
       "{{ 7 % -3 }} {{ -7.5 // 2 }} {{ -2.5|round }}"},
      {"{{ 5 % 0 }}"},
      {"{{ 1 // 0 }}"},
      {"{{ 'ab' * 3 }}|{{ 3 * 'ab' }}|{{ 'x' * 0 }}|{{ 'x' * -1 }}|{{ '-' * 2 ~ 'é' * 2 }}"},
      {"{{ [1, 2] + [3] }} {{ [] + [] }} {{ 'a' + 'b' }} {{ 1 + 2.5 }} {{ true + 1 }}"},
      {"{{ 'n' ~ 1 ~ none ~ true ~ 1.0 ~ [1] ~ missing }}"},
      {"{{ 'a' + 1 }}"},
      {"{{ [1] + 'a' }}"},
      {"{{ 'a' - 'b' }}"},
      // Comparisons (chained as in Python), `in`, `not in`, and/or returning
      // an operand, not, and their precedence.
      {"{{ 1 < 2 }} {{ 2 <= 2 }} {{ 'a' < 'b' }} {{ 'B' < 'a' }} {{ 1 == 1.0 }} {{ 1 != 2 }} "
       "{{ 3 > 2 > 1 }}"},
      {"{{ [1, 2] == [1, 2] }} {{ [1, 2] < [1, 3] }} {{ {'a': 1} == {'a': 1} }} {{ 1 == '1' }} "
       "{{ true == 1 }}"},
      {"{{ 1 < 'a' }}"},
      {"{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} "
       "{{ not 'b' in 'abc' }}"},
      {"{{ 'a' in ('a', 'b') }} {{ '' in 'abc' }} {{ none in [none] }} {{ 'é' in 'café' }}"},
      {"[{{ 0 or 'x' }}][{{ 'a' and 'b' }}][{{ none or [] }}][{{ '' and 1 }}][{{ not 0 }}][{{ not [1] }}]"},
      {"{{ true or false and false }} {{ not true == false }} {{ (true or false) and false }}"},
      // Conditional expressions, with and without else (Undefined then).
      {"{{ x if x is defined else 'd' }} {{ y if y is defined else 'd' }} {% set n = n + 1 %}{{ n }}",
       R"j({"x": "set", "n": 1})j"},
      {"{{ 'y' if true else 'n' }}|{{ 'y' if false }}|{{ ('a' if false) ~ 'b' }}"
       "|{{ 1 if 0 else 2 if 1 else 3 }}"},
      // if/elif/else and Python's truth values.
      {"{% if x > 2 %}big{% elif x > 1 %}mid{% else %}small{% endif %}", R"j({"x": 2})j"},
      {"{% if [] %}a{% elif {} %}b{% elif '' %}c{% elif 0.0 %}d{% elif none %}e{% elif missing %}"
       "f{% else %}g{% endif %}"},
      {"{% if 'x' and [0] and {'a': 0} and -1 %}truthy{% endif %}"},
      // for: loop.*, for-else, a filter on the loop, tuple targets, strings
      // and dicts walked, nested loops, break and continue, loop.cycle.
      {"{% for x in ['a', 'b', 'c'] %}{{ x }}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
       "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}"},
      {"{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}"},
      {"{% for x in range(5) %}{{ loop.cycle('odd', 'even') }} {% endfor %}"},
      {"{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for x in [1] %}{{ x }}{% else %}"
       "empty{% endfor %}"},
      {"{% for x in range(10) if x is odd %}{{ x }}:{{ loop.index }}/{{ loop.length }}"
       "{{ '.' if loop.last }},{% endfor %}"},
      {"{% for x in [1, 2] if x > 5 %}{{ x }}{% else %}none passed{% endfor %}"},
      {"{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}"},
      {"{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}{% for (a, b) in [('x', 'y')] %}{{ b }}"
       "{{ a }}{% endfor %}"},
      {"{% for a, b in [[1, 2, 3]] %}{% endfor %}"},
      {"{% for c in 'héy' %}{{ c }}.{% endfor %}|{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}"},
      {"{% for x in missing %}{{ x }}{% else %}nothing{% endfor %}"},
      {"{% for x in 5 %}{% endfor %}"},
      {"{% for x in none %}{% endfor %}"},
      {"{% for a, b, c in [[1, 2, 3], 'xyz'] %}{{ c }}{{ b }}{{ a }} {% endfor %}"},
      {"{% for x in [1] %}{% break %}{% else %}e{% endfor %}|{% for x in 'abc' if x != 'b' %}{{ x }}"
       "{{ loop.revindex }}{% endfor %}"},
      {"{% for x in [1, 2] %}{{ x }}{% continue %}{% else %}e{% endfor %}|{% for x in [1, 2] %}{{ x }}"
       "{% if x == 2 %}{% break %}{% endif %}{% else %}e{% endfor %}"},
      {"{% set x = [1, 2] %}{% set y = x %}{{ x is sameas y }} {{ x is sameas [1, 2] }}"},
      {"{% for i in range(3) %}{% for j in range(3) %}{% if j > i %}{% break %}{% endif %}{{ i }}{{ j }} "
       "{% endfor %}{% endfor %}"},
      {"{% for x in range(10) %}{% if x == 7 %}{% break %}{% endif %}{% if x is even %}{% continue %}"
       "{% endif %}{{ x }}{% endfor %}"},
      {"{% for i in range(2) %}{% set outer = loop.index %}{% for j in 'ab' %}{{ outer }}{{ j }}"
       "{{ loop.index }} {% endfor %}{% endfor %}"},
      {"{% for x in [1, 2] %}{% for y in [3] %}{{ loop.first }}{% endfor %}{{ loop.last }}{% endfor %}"},
      {"{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(10, 0, -3)|list }} {{ range(0)|list }}"},
      {"{{ range(100000)|length }}"},
      {"{{ range(100001)|length }}"},
      // set: names, tuples, scoping (a loop's sets stay in the loop, an if's
      // do not), namespaces, set blocks.
      {"{% set x = 1 %}{% set a, b = 'ab' %}{% set c, d = 3, 4 %}{{ x }}{{ a }}{{ b }}{{ c }}{{ d }}"},
      {"{% set x = 1 %}{% for i in range(3) %}{% set x = i %}{{ x }}{% endfor %}|{{ x }}"},
      {"{% if true %}{% set y = 2 %}{% endif %}{{ y }}"},
      {"{% set x = 'outer' %}{% for x in [1, 2] %}{{ x }}{% endfor %}{{ x }}"},
      {"{% set ns = namespace(n=0, found=false) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
       "{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.n }} {{ ns.found }}"},
      {"{% set ns = namespace(items=[]) %}{% for i in range(3) %}{% set ns.items = ns.items + [i] %}"
       "{% endfor %}{{ ns.items }} {{ ns.missing }}|"},
      {"{% set ns = namespace() %}{% set ns._x = 1 %}"},
      {"{% set ns = namespace(a=1, a=2) %}{{ ns.a }}"},
      {"{% set d = {} %}{% set d.x = 1 %}"},
      {"{% set a, b = [1] %}"},
      {"{% set x %}Hello {{ name }}!{% endset %}[{{ x }}] {{ x|length }}", R"j({"name": "Ann"})j"},
      {"{% set x -%}\n  padded  \n{%- endset %}[{{ x }}]"},
      {"{% set x %}\n  a\n{% endset %}[{{ x }}]"},
      // Macros: defaults, keyword arguments, missing arguments as Undefined,
      // too many or unknown arguments refused, recursion, globals inside.
      {"{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}"
       "{{ greet('Bob') }} {{ greet('Ann', greeting='Hi') }} {{ greet(name='Zed') }} "
       "{{ greet('A', 'Yo') }}"},
      {"{% macro f(a, b) %}[{{ a }}|{{ b }}]{% endmacro %}{{ f(1) }}{{ f() }}"},
      {"{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}"},
      {"{% macro f(a) %}{{ a }}{% endmacro %}{{ f(b=2) }}"},
      {"{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, a=2) }}"},
      {"{% macro f(a=x) %}{{ a }}{% endmacro %}{{ f() }}{{ f(2) }}", R"j({"x": "ctx"})j"},
      {"{% macro f(a, b=a) %}{{ b }}{% endmacro %}{{ f(1) }}{{ f(1, 2) }}"},
      {"{% for i in [1, 2] %}{% macro f() %}{{ i }}{% endmacro %}{{ f() }}{% endfor %}"},
      {"{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"},
      {"{% macro tag() %}<{{ who }}>{% endmacro %}{% set s = tag() %}{{ s }}{{ s|length }}"
       "{{ tag()|upper }}",
       R"j({"who": "me"})j"},
      {"{% macro f() %}{% set inner = 1 %}{{ inner }}{% endmacro %}{{ f() }}[{{ inner }}]"},
      // Whitespace control and trim_blocks/lstrip_blocks: indented tags,
      // tags after text on a line, {%+ %}, comments, the trailing newline
      // (Jinja2 drops one), `{{` untouched by lstrip_blocks.
      {"a  {{- ' b ' -}}  c"},
      {"a\n  {%- if true -%}\n  x\n  {%- endif -%}\n  b"},
      {"{% if true %}\nyes\n{% endif %}\nend"},
      {"{% if true %}\n\nx{% endif %}|{% if true %}  \ny{% endif %}|a   {%- set v = 1 %}b"},
      {"  {% if true %}\n  x\n  {% endif %}\n"},
      {"\t {% for i in [1, 2] %}\n\t{{ i }}\n\t {% endfor %}\ndone"},
      {"a {% if true %}b{% endif %}\nc"},
      {"  {%+ if true %}x{% endif %}\n"},
      {"  {{ 'x' }}\n  {{ 'y' }}\n"},
      {"x\n\n"},
      {"x\n"},
      {"{% if true %}x{% endif %}\n\n"},
      {"a\rb\r{% if true %}\rc{% endif %}\r"},
      {"{% if true +%}\nx{% endif %}"},
      {"{{ 'a' }}\nb\n{% if true -%}   \n\n  x{%- endif %}\n{# multi\nline #}\nc"},
      {R"j({{ '}}' }}|{{ "{{" }}|{{ '{%' }}|{{ '{' ~ x ~ '}' }}|)j"
       R"j({% set j = '{"name": "' + x + '"}' %}{{ j }}|a { b } c %} #})j",
       R"j({"x": "f"})j"},
      {"a{# comment #}b\n  {# indented comment #}\nc\n{#- trimmed -#}\n  d"},
      {"{% for m in ['a', 'b'] %}\n{{ m }}\n{% endfor %}\n"},
      {"{%- for m in ['a', 'b'] -%}\n  {{ m }}\n{%- endfor %}\n"},
      {"<{% if false %}no{% else %}\n\n  yes\n{% endif %}>"},
      {"line1\r\n{% if true %}\r\nline2\r\n{% endif %}\r\n"},
      // raise_exception: Jinja2's TemplateError with the message.
      {"{% if r not in ['user', 'assistant'] %}{{ raise_exception('Bad role: ' ~ r) }}{% endif %}ok",
       R"j({"r": "tool"})j"},
      {"{% if false %}{{ raise_exception('never') }}{% endif %}ok"},
      // Unicode: lengths, indices and slices in code points.
      {"{{ s|length }} {{ s[1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s[-1] }} {{ s|upper }}", kItems},
      {"{{ 'straße'|upper }} {{ 'ǅ'|lower }} {{ 'ΣΑΣ'|lower }}"},
      {"{{ 'İstanbul'|lower }} {{ 'İstanbul'.title() }}"},
      {"{{ 'élan vital'|capitalize }} {{ 'ÉLAN'|lower }} {{ 'é' > 'z' }} {{ 'ÿ' < 'Ā' }}"},
      {"[{{ x|trim }}][{{ x.strip() }}][{{ x.split() }}][{{ y.splitlines() }}]",
       R"j({"x": "\u00a0\u3000 a\u2003b \u0085\u001c", "y": "a\u000bb\u001cc\u2028d\r"})j"},
      {"{{ '日本語'|length }} {{ '日本語'[1:] }} {{ 'ü' * 2 }} {{ 'héllo'.find('l') }} {{ 'åbc'|title }}"},
      // Slicing and indexing: negative, steps, out of range (Undefined).
      {"{{ [1, 2, 3, 4, 5][1:3] }} {{ [1, 2, 3, 4, 5][::-1] }} {{ [1, 2, 3, 4, 5][-2:] }} "
       "{{ [1, 2, 3, 4, 5][::2] }} {{ [1, 2, 3, 4, 5][:-3] }} {{ [1, 2, 3, 4, 5][4:1:-2] }} "
       "{{ [1, 2, 3][5:] }}"},
      {"{{ 'abcdef'[1:-1] }} {{ 'abc'[-1] }} {{ [1, 2, 3][-1] }} [{{ [1, 2, 3][5] }}] [{{ 'abc'[10] }}"
       "] {{ 'abc'[::-1] }} {{ [1, 2, 3][-5:] }}"},
      {"{{ [1, 2, 3][::0] }}"},
      {"{{ messages[0].content }}|{{ messages[-1]['role'] }}|{{ messages[1:]|length }}", kChat},
      // Globals: dict(), namespace() (above), range() (above).
      {"{{ dict(a=1, b='x') }} {{ dict(a=1)|tojson }} {{ dict() }}"},
      // Syntax errors (Burst refuses them when parsing).
      {"{% if true %}unclosed"},
      {"{{ 1 + }}"},
      {"{% endfor %}"},
      {"{{ 'unterminated }}"},
      {"{% for x in [1] %}{% endif %}"},
      {"{{ x | nosuchfilter }}"},
      {"{% if x is nosuchtest %}{% endif %}"},
      // The {% generation %} block renders its body.
      {"{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content|trim }}"
       "{% endgeneration %}{% else %}[{{ m.role }}]{% endif %}{% endfor %}",
       kChat},
  };
  return cases;
}

TEST(JinjaReference, RendersWhatJinja2Renders) {
  Json cases = Json::array();
  for (const std::vector<Case>* part : {&LanguageCases(), &BuiltinAndTemplateCases()}) {
    for (const Case& c : *part)
      cases.push_back({{"template", std::string(c.tmpl)}, {"context", ParseJson(c.context, "context")}});
  }
  const fs::path cases_file = MakeTempDir("burst-jinja") / "cases.json";
  WriteFileAtomic(cases_file, cases.dump());
  const Json want =
      ParseJson(test_util::CommandOutput(BURST_PYTHON " '" + (kReferenceDir / "jinja_ref.py").string() +
                                         "' '" + cases_file.string() + "'"),
                "jinja_ref.py");
  fs::remove_all(cases_file.parent_path());
  ASSERT_EQ(want.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string tmpl = cases[i]["template"];
    SCOPED_TRACE("case " + std::to_string(i) + ": " + tmpl + "\ncontext: " + cases[i]["context"].dump());
    const jinja::Dict context = Context(cases[i]["context"]);
    if (want[i]["ok"].get<bool>()) {
      try {
        EXPECT_EQ(jinja::Render(*jinja::Parse(tmpl, "t"), context, {}).text.s,
                  want[i]["text"].get<std::string>());
      } catch (const Error& e) {
        ADD_FAILURE() << "Jinja2 renders " << want[i]["text"].dump() << "; Burst: " << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "not a burst::Error: " << e.what();
      }
      continue;
    }
    // Jinja2 raised: Burst refuses too, when parsing or rendering; a
    // raise_exception's message (Jinja2's plain TemplateError) comes through.
    const std::string error = want[i]["error"];
    try {
      const std::string got = jinja::Render(*jinja::Parse(tmpl, "t"), context, {}).text.s;
      ADD_FAILURE() << "Jinja2 raised " << error << "; Burst rendered " << DumpJson(Json(got));
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), Code::kInvalidArgument) << e.what();
      const std::string prefix = "TemplateError: ";
      if (error.rfind(prefix, 0) == 0) {
        EXPECT_NE(std::string(e.what()).find(error.substr(prefix.size())), std::string::npos)
            << "Jinja2: " << error << "; Burst: " << e.what();
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "Jinja2 raised " << error << "; Burst threw a non-burst::Error: " << e.what();
    }
  }
}

}  // namespace
}  // namespace burst::jinja_test
