// Renders chat conversations with a model's own chat_template through
// @huggingface/jinja (the engine transformers.js runs templates with), as
// serving stacks render them: bos_token and eos_token from the same
// tokenizer_config.json, no strftime_now (the template's default date).
// Usage: node chat_template_ref.mjs TOKENIZER_CONFIG.json CASES.json
//   CASES: [{"messages": [...], "add_generation_prompt": bool, "serving": bool}, ...]
// A case not "serving" renders with the template's default date; a serving
// one with @huggingface/jinja's own strftime_now (today).
// Prints a JSON list of the rendered strings.
import fs from "node:fs";
import { Template } from "@huggingface/jinja";

const config = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const cases = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const token = (t) => (t && typeof t === "object" ? t.content : t) ?? "";
const template = new Template(config.chat_template);
const out = cases.map((c) => {
  const context = {
    messages: c.messages,
    add_generation_prompt: c.add_generation_prompt,
    bos_token: token(config.bos_token),
    eos_token: token(config.eos_token),
  };
  // Not serving: the template's own default date_string (jinja's
  // strftime_now cannot be hidden, so the default is read and passed).
  const fallback = /set date_string = "([^"]+)"/.exec(config.chat_template);
  if (!c.serving && fallback) context.date_string = fallback[1];
  return template.render(context);
});
console.log(JSON.stringify(out));
