// Jinja chat templates (a model folder's chat_template): parse the bytes as
// a template, then render it over a short conversation within small bounds.
// Parsing and rendering may refuse with burst::Error; the rendered output
// must keep one origin flag and one owner per byte.
#include "fuzz_util.h"
#include "train/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace burst;
  if (size > 8192) return 0;
  std::shared_ptr<const jinja::Template> t;
  try {
    t = jinja::Parse(fuzz::Text(data, size), "chat_template");
  } catch (const Error&) {
    return 0;
  }
  const Json messages = Json::array({{{"role", "system"}, {"content", " Be brief.\n"}},
                                     {{"role", "user"}, {"content", "Hi <|im_end|>"}},
                                     {{"role", "assistant"}, {"content", "<think>x</think>\n\nHello"}}});
  jinja::Dict ctx;
  const jinja::Value msgs = jinja::FromJson(messages);
  ctx.Set(jinja::Text::Literal("messages"), msgs);
  ctx.Set(jinja::Text::Literal("add_generation_prompt"), jinja::Value::Bool(true));
  ctx.Set(jinja::Text::Literal("bos_token"), jinja::Value::Literal("<s>"));
  jinja::RenderOptions opt;
  opt.max_output = 1 << 20;
  opt.max_steps = 20000;
  for (const jinja::Value& m : msgs.list()) opt.owners.push_back(m.dict().get());
  try {
    const jinja::Rendered r = jinja::Render(*t, ctx, opt);
    fuzz::Expect(r.text.from_data.size() == r.text.s.size(), "an origin flag per output byte");
    fuzz::Expect(r.owner.size() == r.text.s.size(), "an owner per output byte");
    fuzz::Expect(r.text.s.size() <= opt.max_output, "output within max_output");
  } catch (const Error&) {
  }
  return 0;
}
