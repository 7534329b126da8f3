// Burst's Jinja (jinja.h) against Jinja2 itself as transformers configures it
// for apply_chat_template (tests/reference/jinja_ref.py: transformers' own
// compiler, an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks,
// loop controls, {% generation %}, its tojson and raise_exception). A corpus
// of small templates, one or a few constructs each, covers every statement,
// expression, filter, test and method the engine has, Python's printing of
// values, the whitespace rules, and the shapes of real models' chat templates
// (ChatML, Llama 3, Qwen 3, Gemma, Mistral): Burst must render exactly
// Jinja2's text, or fail where Jinja2 raises. Without Python: constructs
// Burst refuses when parsing (naming the line), the limits on steps, output
// and nesting, the data/template origin of every output byte, and the
// attribution of output to the messages a `for` walks.
#include "train/jinja.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

const fs::path kReferenceDir = fs::path(BURST_SOURCE_DIR) / "tests/reference";

std::string Output(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd << "\n" << out;
  return out;
}

// A template and its variables (a JSON object).
struct Case {
  std::string_view tmpl;
  std::string_view context = "{}";
};

// Conversations the chat-template shapes below walk.
constexpr std::string_view kChat =
    R"j({"bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true,
  "messages": [{"role": "system", "content": "  Be brief.\n"},
               {"role": "user", "content": "Hi <|im_end|> there "},
               {"role": "assistant", "content": "<think>\nhmm\n</think>\n\n Hello!"},
               {"role": "user", "content": "Bye"}]})j";
constexpr std::string_view kNoSystem =
    R"j({"bos_token": "<bos>", "eos_token": "<eos>", "add_generation_prompt": true,
  "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello "},
               {"role": "user", "content": " Bye"}]})j";
constexpr std::string_view kBadTurns = R"j({"bos_token": "<bos>",
  "messages": [{"role": "user", "content": "Hi"}, {"role": "user", "content": "Again"}]})j";
constexpr std::string_view kItems = R"j({"items": [{"n": "a", "k": 2, "flag": true}, {"n": "b", "k": 1},
  {"n": "c", "k": 3, "flag": false}], "d": {"b": 1, "a": [2, 3], "c": null}, "s": "héllo wörld ✓ 😀"})j";

// Qwen 3's chat template (its lines as its tokenizer_config.json has them, less tools):
// the reversed scan for the last user query with a namespace, and the
// reasoning split out of the content with split('</think>')[-1].lstrip('\n').
constexpr std::string_view kQwen3 = R"j({%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}
)j";

// Gemma's: a system message folded into the first user turn, roles checked
// to alternate (raise_exception otherwise), "assistant" renamed "model".
constexpr std::string_view kGemma = R"j({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)j";

// Mistral's: the user turns picked with selectattr, the system message put
// before the last one.
constexpr std::string_view kMistral = R"j({%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.last and system_message is defined %}
            {{- '[INST] ' + system_message + '\n\n' + message['content'] + '[/INST]' }}
        {%- else %}
            {{- '[INST] ' + message['content'] + '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content']|trim + eos_token }}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
{{- '|' ~ user_messages|length }}
)j";

const std::vector<Case>& Corpus() {
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
      // Filters.
      {"[{{ '  a b \n'|trim }}][{{ 'xxaxx'|trim('x') }}][{{ x|trim }}]", R"j({"x": "\n\t y \r\n"})j"},
      {"{{ [1, 2, 3]|length }} {{ 'abc'|count }} {{ {'a': 1}|length }} {{ ''|length }} {{ x|length }}",
       R"j({"x": [[1, 2], 3]})j"},
      {"{{ 'abc'|list }} {{ {'a': 1, 'b': 2}|list }} {{ [1]|list }}"},
      {"{{ 5|string ~ 'x' }} {{ [1, 'a']|string }} {{ none|string }} {{ 1.0|string }} "
       "{{ true|string|length }}"},
      {"{{ '42'|int }} {{ 3.9|int }} {{ -3.9|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '  12 '|int }} "
       "{{ '3.7'|int }} {{ true|int }} {{ none|int }} {{ '1e3'|int }} {{ '-0'|int }} "
       "[{{ '  '|default('x', true) }}]"},
      {"{{ '2.5'|float }} {{ 3|float }} {{ 'x'|float }} {{ 'x'|float(1.5) }} {{ '1e3'|float }} "
       "{{ 2|float * 2 }}"},
      {"{{ 'hELLo wORLD'|lower }} {{ 'hELLo wORLD'|upper }} {{ 'hELLo wORLD'|capitalize }} "
       "{{ \"hello world-foo o'neil (x)\"|title }}"},
      {"{{ [1, 2, 3]|first }} {{ 'abc'|last }} [{{ []|first }}] {{ [1, 2, 3]|last }} {{ 'héllo'|first }}"},
      {"{{ [1, 2, 3]|join(', ') }} {{ ['a', 'b']|join }} {{ items|join('-', attribute='n') }} "
       "{{ 'abc'|join('.') }}",
       kItems},
      {"[{{ missing|default('dflt') }}][{{ none|default('n') }}][{{ none|d('n', true) }}"
       "][{{ ''|default('e', boolean=true) }}][{{ 0|d(5) }}][{{ missing|d }}][{{ x|default('no') }}]",
       R"j({"x": ""})j"},
      {"{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}"
       "|{{ messages|rejectattr('role', 'eq', 'system')|list|length }}"
       "|{{ messages|selectattr('role', 'in', ['system', 'assistant'])|map(attribute='role')|list }}",
       kChat},
      {"{{ items|selectattr('flag')|map(attribute='n')|list }} "
       "{{ items|rejectattr('flag')|map(attribute='n')|list }} "
       "{{ items|selectattr('flag', 'defined')|list|length }} "
       "{{ items|selectattr('k', 'gt', 1)|map(attribute='n')|join }}",
       kItems},
      {"{{ range(10)|select('odd')|list }} {{ [0, 1, '', none, 'a', [], [0]]|select|list }} "
       "{{ range(10)|reject('divisibleby', 3)|list }} {{ [1, 5, 9]|select('ge', 5)|list }} "
       "{{ ['a', 'B']|select('upper')|list }}"},
      {"{{ ['a', 'b']|map('upper')|join }} {{ ['1', '2']|map('int')|sum }} "
       "{{ items|map(attribute='n')|list }} {{ items|map(attribute='flag', default='d')|list }} "
       "{{ ['x ', ' y']|map('trim')|list }}",
       kItems},
      {"{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}", kItems},
      {"{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }} "
       "{{ 'a.b'|replace('.', '') }}"},
      {"{{ x|tojson }}", R"j({"x": {"b": [1, 2.5, null, true, false], "a": "é\"<>&'\\/", "c": {}}})j"},
      {"{{ x|tojson(indent=2) }}", R"j({"x": {"b": [1, [2, {"z": []}]], "a": "ü", "c": {}}})j"},
      {"{{ x|tojson(indent=4) }}", R"j({"x": [{"name": "get", "parameters": {"type": "object"}}]})j"},
      {"{{ {'b': 1, 'a': {'d': 2, 'c': 3}}|tojson(sort_keys=true) }} {{ {'b': 1, 'a': 2}|tojson }}"},
      {"{{ [1, {'a': 2}]|tojson(separators=(',', ':')) }} "
       "{{ {'a': [1, 2]}|tojson(indent=2, separators=(',', ': ')) }}"},
      {"{{ [1.0, 0.1, 1e20, 1e-7, 3.14159, -0.0, 100, 12345678901234] | tojson }}"},
      {R"j({{ 'é\n\t\u0001😀'|tojson }} {{ 'é😀'|tojson(ensure_ascii=true) }} {{ none|tojson }})j"
       R"j( {{ []|tojson }} {{ {}|tojson(indent=2) }} {{ [[]]|tojson(indent=1) }})j"},
      {"{{ x|tojson }}|{{ x.a|tojson }}", R"j({"x": {"a": "line\nbreak \"q\" \u001f end"}})j"},
      {"{{ true|tojson }} {{ 1.5|tojson }} {{ 'a'|tojson }} {{ [1, [2]]|tojson(indent=0) }}"},
      {"{{ x['é'] }} {{ x|tojson }} {{ x }}", R"j({"x": {"é": "ü"}})j"},
      {"{{ x|tojson }} {{ x|tojson(ensure_ascii=true) }}", R"j({"x": "\u007f\u0080\u2028 é"})j"},
      {"{{ '<b>'|safe }} {{ '<i>'|safe|length }}"},
      {"{{ [1, 2, 1, 'a', 'A', 'b']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} "
       "{{ items|unique(attribute='k')|map(attribute='n')|list }}",
       kItems},
      {"{{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }} {{ 'héllo'|reverse }}"},
      {"{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'a', 'B']|sort }} "
       "{{ ['b', 'a', 'B']|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }} "
       "{{ items|sort(attribute='k')|map(attribute='n')|join }}",
       kItems},
      {"{{ [1, 'a']|sort }}"},
      {"{{ items|sum(attribute='k', start=1) }} {{ [[1], [2]]|sum(start=[]) }} {{ [1, 1.5]|max }} "
       "{{ items|max(attribute='k')|tojson }} {{ 'aAbB'|unique|list }} {{ {'b': 1, 'a': 2}|sort }} "
       "{{ 'cba'|sort }}",
       R"j({"items": [{"k": 1}, {"k": 5}]})j"},
      {"{{ items|map(attribute='meta.x')|list }} {{ [[1, 2], [3, 4]]|map(attribute='1')|list }} "
       "{{ items|selectattr('meta.x', 'equalto', 1)|list|length }} "
       "{{ items|sort(attribute='meta.x')|map(attribute='n')|join }}",
       R"j({"items": [{"n": "a", "meta": {"x": 2}}, {"n": "b", "meta": {"x": 1}}]})j"},
      {"{{ none|trim }} {{ none|upper }} {{ 5|upper }} [{{ ''|first }}] [{{ []|last }}"
       "] {{ [none]|first is none }} {{ 'abc'|first|upper }}"},
      {"{{ none|length }}"},
      {"{{ 5|length }}"},
      {"{{ 'inf'|float }} {{ 'nan'|float }} {{ '-1.5e-3'|float }} {{ ' 1_000 '|int }} "
       "{{ '0x1A'|int(base=16) }} {{ 'ff'|int(base=16) }} {{ '12'|int + 1 }}"},
      {"[{{ 'a\nb'|indent('> ') }}][{{ 'a\nb\n'|indent(2) }}][{{ 'a\nb\n'|indent(2, true, true) }}"
       "][{{ ''|indent(2, true) }}]"},
      {"{{ 'aaa'|replace('a', 'b', 0) }} {{ x|default(none) is none }} {{ dict(a=1).a }} "
       "{% set x = {'a': 1} %}{{ x.a + x['a'] }}"},
      {"[{{ 'a\nb\n\nc'|indent(2) }}][{{ 'a\nb'|indent(4, true) }}][{{ 'a\n\nb'|indent(2, blank=true) }}"
       "][{{ 'a\nb'|indent }}][{{ 'a\nb'|indent(first=true, width=1) }}]"},
      {"{{ -3|abs }} {{ (-3)|abs }} {{ -3.5|abs }} {{ 0|abs }} {{ x|abs }}", R"j({"x": -7})j"},
      {"{{ 2.5|round }} {{ 3.5|round }} {{ 3.14159|round(2) }} {{ 2.7|round(0, 'floor') }} "
       "{{ 2.1|round(0, 'ceil') }} {{ 2.5|round|int }} {{ 7|round }}"},
      {"{{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ items|sum(attribute='k') }} {{ [1]|sum(start=10) }} "
       "{{ []|sum }}",
       kItems},
      {"{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A', 'c']|max }} {{ ['b', 'A', 'c']|min }} "
       "{{ ['b', 'A', 'c']|max(case_sensitive=true) }} [{{ []|min }}"
       "] {{ items|min(attribute='k')|tojson }}",
       kItems},
      {"{{ '<a href=\"x\">&\\'</a>'|escape }} {{ 5|escape }}"},
      {"{{ x|trim|length is odd }} {{ messages|length - 1 }}", R"j({"x": " ab ", "messages": [1, 2]})j"},
      // Tests.
      {"{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ none is none }} {{ x is none }} "
       "{{ x is not none }} {{ not x is defined }}",
       R"j({"x": 0})j"},
      {"{{ true is boolean }} {{ 1 is boolean }} {{ true is true }} {{ 1 is true }} {{ false is false }} "
       "{{ 0 is false }} {{ none is false }}"},
      {"{{ 'a' is string }} {{ 1 is string }} {{ 1 is number }} {{ 1.5 is number }} {{ true is number }} "
       "{{ '1' is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is integer }} "
       "{{ 1.0 is float }} {{ 1 is float }}"},
      {"{{ {} is mapping }} {{ [] is mapping }} {{ 'a' is iterable }} {{ 1 is iterable }} "
       "{{ {} is iterable }} {{ [] is sequence }} {{ 'a' is sequence }} {{ {} is sequence }} "
       "{{ 1 is sequence }}"},
      {"{{ range is callable }} {{ 'a' is callable }} {{ raise_exception is callable }} "
       "{{ ''.strip is callable }} {{ x is mapping }} {{ x is callable }}",
       R"j({"x": {}})j"},
      {"{{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 2 is gt 1 }} "
       "{{ 2 is le 2 }} {{ 2 is ge 3 }} {{ 'a' is in 'abc' }} {{ 2 is in [1] }} {{ 2 is eq(2) }} "
       "{{ x is not eq 'u' }}",
       R"j({"x": "u"})j"},
      {"{{ 3 is odd }} {{ 3 is even }} {{ 0 is even }} {{ -3 is odd }} {{ 9 is divisibleby 3 }} "
       "{{ 9 is divisibleby(2) }}"},
      {"{{ 'abc' is lower }} {{ 'aBc' is lower }} {{ 'ABC' is upper }} {{ '1' is lower }} "
       "{{ 'A1' is upper }}"},
      {"{{ none is sameas none }} {{ true is sameas true }} {{ 1 is sameas true }} "
       "{{ false is sameas 0 }}"},
      {"{{ 'x' is odd }}"},
      {"{{ 9 is not divisibleby 3 }} {{ 'a' in 'abc' and 'z' }} {{ not -1 }} "
       "{{ 'x' ~ (1 if false) ~ 'y' }}"},
      {"{{ 'abc'.startswith('b', 1) }} {{ 'a-b-c'.split('-', -1) }} {{ 'x y'.strip(none) }}"
       "|{{ 'Hello World'.lower().split() }}"},
      {"{{ 'banana'.find('a', 2) }} {{ 'banana'.rfind('a', 0, 3) }} {{ 'banana'.count('a', 2) }}"},
      {"{{ 'a'.endswith(['a']) }}"},
      {"{{ x.items()|list }} {{ (1, 'a') }} {{ (1,) }}", R"j({"x": {"a": 1}})j"},
      // str methods.
      {"[{{ '  a  '.strip() }}][{{ 'xxaxx'.strip('x') }}][{{ '  a  '.lstrip() }}][{{ '  a  '.rstrip() }}"
       "][{{ 'xyaxy'.lstrip('xy') }}][{{ 'xyaxy'.rstrip('yx') }}][{{ '\n\t a\n'.strip() }}"
       "][{{ ''.strip() }}]"},
      {"{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} "
       "{{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b '.split(' ') }} {{ ' a  b '.split() }} {{ ''.split() }} "
       "{{ ''.split(',') }}"},
      {"{{ 'a b c'.split(maxsplit=1) }} {{ 'a b c'.rsplit(maxsplit=1) }} {{ 'a<>b<>c'.split('<>') }} "
       "{{ 'a b c'.rsplit() }} {{ 'abc'.split('abc') }}"},
      {"{{ 'a,b'.split('') }}"},
      {"{{ 'a\nb\r\nc\n'.splitlines() }} {{ ''.splitlines() }} {{ 'x'.splitlines() }} "
       "{{ '\n\n'.splitlines() }}"},
      {"{{ 'hello'.startswith('he') }} {{ 'hello'.startswith(('x', 'h')) }} "
       "{{ 'hello'.endswith(('lo', 'z')) }} {{ 'hello'.endswith('x') }} {{ 'hello'.startswith('') }} "
       "{{ 'é'.startswith('é') }}"},
      {"{{ 'aB c'.upper() }} {{ 'aB c'.lower() }} {{ \"hello o'neil-x 2nd\".title() }} "
       "{{ 'hELLO wORLD'.capitalize() }}"},
      {"{{ 'aaa'.replace('a', 'bb') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ 'abc'.replace('', '-') }}"},
      {"{{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'abc'.find('z') }} {{ 'abc'.rfind('z') }} "
       "{{ 'abc'.find('') }} {{ 'aé€c'.rfind('c') }}"},
      {"{{ 'banana'.count('a') }} {{ 'aaaa'.count('aa') }} {{ 'abc'.count('') }} {{ 'ééé'.count('é') }}"},
      {"{{ ', '.join(['a', 'b']) }} {{ '-'.join('abc') }} {{ ''.join([]) }}"},
      {"{{ ', '.join([1, 2]) }}"},
      {"{{ '123'.isdigit() }} {{ '12a'.isdigit() }} {{ ''.isdigit() }} {{ 'abc'.isalpha() }} "
       "{{ 'ab1'.isalpha() }} {{ ''.isalpha() }} {{ 'é'.isalpha() }}"},
      {"{{ 'abc'.nosuchmethod() }}"},
      // dict methods.
      {"{% for k, v in d.items() %}{{ k }}:{{ v }} {% endfor %}{{ d.keys()|list }} {{ d.values()|list }} "
       "{{ d.get('b') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }} {{ d.get('c', 'kept none') }}",
       kItems},
      {"{% for k in d.keys() %}{{ k }}{% endfor %} {% for v in d.values() %}{{ v }}{% endfor %} "
       "{{ 'a' in d }} {{ 'z' in d.keys() }}",
       kItems},
      {"{{ [1, 2].append(3) }}"},
      {"{{ messages.pop() }}", kChat},
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
      // Real templates' shapes.
      {"{%- for message in messages %}"
       "\n{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
       "\n{%- endfor %}\n{%- if add_generation_prompt %}\n{{- '<|im_start|>assistant\\n' }}\n{%- endif %}"
       "\n",
       kChat},
      {"{%- if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
       "{% for message in messages %}"
       "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
       "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
       R"j({"messages": [{"role": "user", "content": "x"}]})j"},
      {"{%- set loop_messages = messages %}\n{%- for message in loop_messages %}"
       "\n    {%- set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
       "message['content'] | trim + '<|eot_id|>' %}\n    {%- if loop.index0 == 0 %}"
       "\n        {%- set content = bos_token + content %}\n    {%- endif %}\n    {{- content }}"
       "\n{%- endfor %}\n{%- if add_generation_prompt %}"
       "\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n",
       kChat},
      {kQwen3, kChat},
      {kQwen3, R"j({"add_generation_prompt": true, "enable_thinking": false,
         "messages": [{"role": "user", "content": "<tool_response>x</tool_response>"},
                      {"role": "assistant", "content": "ok", "reasoning_content": "\nsaw it\n"},
                      {"role": "user", "content": "q"},
                      {"role": "assistant", "content": "<think>r</think>a"}]})j"},
      {kGemma, kChat},
      {kGemma, kNoSystem},
      {kGemma, kBadTurns},
      {kGemma, R"j({"bos_token": "<bos>", "messages": [{"role": "user", "content": [{"type": "image"},
         {"type": "text", "text": " look "}]}, {"role": "assistant", "content": "ok"}]})j"},
      {kMistral, kChat},
      {kMistral, kNoSystem},
      {"{%- set non_system = messages|rejectattr('role', 'equalto', 'system')|list %}"
       "{{ non_system|map(attribute='content')|map('trim')|join('|') }}"
       "/{{ messages|selectattr('role', 'equalto', 'tool')|list|length }}"
       "/{{ (messages|selectattr('role', 'equalto', 'user')|list)[-1]['content'] }}"
       "/{{ messages|map(attribute='role')|unique|list|tojson }}",
       kChat},
      {"{%- if tools %}{{ '# Tools\\n' }}{% for tool in tools %}{{ tool|tojson }}\n{% endfor %}"
       "{% endif %}{{ messages|length }}",
       R"j({"tools": [{"type": "function",
                 "function": {"name": "f", "parameters": {"properties": {"x": {"type": "integer"}}}}}],
           "messages": []})j"},
  };
  return cases;
}

// The context of a case: a JSON object's items as the template's variables.
jinja::Dict Context(const Json& j) {
  jinja::Dict d;
  for (const auto& [k, v] : j.items()) d.Set(jinja::Text::Literal(k), jinja::FromJson(v));
  return d;
}

TEST(JinjaReference, RendersWhatJinja2Renders) {
  const std::vector<Case>& corpus = Corpus();
  Json cases = Json::array();
  for (const Case& c : corpus)
    cases.push_back({{"template", std::string(c.tmpl)}, {"context", ParseJson(c.context, "context")}});
  const fs::path cases_file = MakeTempDir("burst-jinja") / "cases.json";
  WriteFileAtomic(cases_file, cases.dump());
  const Json want = ParseJson(Output(BURST_PYTHON " '" + (kReferenceDir / "jinja_ref.py").string() + "' '" +
                                     cases_file.string() + "'"),
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
}  // namespace burst
