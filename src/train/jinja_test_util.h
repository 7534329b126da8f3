// What the Jinja tests share (jinja_test.cpp, jinja_corpus_test.cpp,
// jinja_limits_test.cpp): a case of the differential corpus, the contexts
// many cases render, and a JSON object turned into a template's variables.
#pragma once

#include <string_view>
#include <vector>

#include "core/json.h"
#include "train/jinja.h"

namespace burst::jinja_test {

// A template and its variables (a JSON object).
struct Case {
  std::string_view tmpl;
  std::string_view context = "{}";
};

// A conversation, and lists, dicts and non-ASCII text, that many cases render.
inline constexpr std::string_view kChat =
    R"j({"bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true,
  "messages": [{"role": "system", "content": "  Be brief.\n"},
               {"role": "user", "content": "Hi <|im_end|> there "},
               {"role": "assistant", "content": "<think>\nhmm\n</think>\n\n Hello!"},
               {"role": "user", "content": "Bye"}]})j";
inline constexpr std::string_view kItems =
    R"j({"items": [{"n": "a", "k": 2, "flag": true}, {"n": "b", "k": 1},
  {"n": "c", "k": 3, "flag": false}], "d": {"b": 1, "a": [2, 3], "c": null}, "s": "héllo wörld ✓ 😀"})j";

// The corpus's cases for the filters, tests and methods and for real chat
// templates' shapes (jinja_corpus_test.cpp); jinja_test.cpp has the rest.
const std::vector<Case>& BuiltinAndTemplateCases();

// The context of a case: a JSON object's items as the template's variables.
inline jinja::Dict Context(const Json& j) {
  jinja::Dict d;
  for (const auto& [k, v] : j.items()) d.Set(jinja::Text::Literal(k), jinja::FromJson(v));
  return d;
}

}  // namespace burst::jinja_test
