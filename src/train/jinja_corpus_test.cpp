// The differential corpus's cases (jinja_test.cpp) for the filters, tests
// and str and dict methods, and the shapes of real models' chat templates
// (ChatML, Llama 3, Qwen 3, Gemma, Mistral).
#include <string_view>
#include <vector>

#include "train/jinja_test_util.h"

namespace burst::jinja_test {
namespace {

// Conversations the chat-template shapes below walk (and kChat).
constexpr std::string_view kNoSystem =
    R"j({"bos_token": "<bos>", "eos_token": "<eos>", "add_generation_prompt": true,
  "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello "},
               {"role": "user", "content": " Bye"}]})j";
constexpr std::string_view kBadTurns = R"j({"bos_token": "<bos>",
  "messages": [{"role": "user", "content": "Hi"}, {"role": "user", "content": "Again"}]})j";

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

}  // namespace

const std::vector<Case>& BuiltinAndTemplateCases() {
  static const std::vector<Case> cases = {
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

}  // namespace burst::jinja_test
