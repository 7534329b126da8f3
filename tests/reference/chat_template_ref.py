"""Renders chat conversations with a model's own chat_template as
transformers' apply_chat_template does: Jinja2 (Debian's python3-jinja2),
a sandboxed environment with trim_blocks and lstrip_blocks, loop controls,
raise_exception and strftime_now, bos_token and eos_token from the same
tokenizer_config.json. This is the engine behind transformers and vLLM;
@huggingface/jinja (transformers.js) differs from it on Qwen 3's template
(its lstrip('\\n') strips spaces too).

Usage: /usr/bin/python3 chat_template_ref.py TOKENIZER_CONFIG.json CASES.json
  CASES: [{"messages": [...], "add_generation_prompt": bool, "serving": bool}, ...]
A case not "serving" renders with the template's default date (its
date_string); a serving one with strftime_now (today, UTC).
Prints a JSON list of the rendered strings.
"""
import datetime
import json
import re
import sys

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise TemplateError(message)


def strftime_now(fmt):
    return datetime.datetime.now(datetime.timezone.utc).strftime(fmt)


def token(t):
    if isinstance(t, dict):
        return t.get("content", "")
    return t or ""


def main():
    config = json.load(open(sys.argv[1], encoding="utf-8"))
    cases = json.load(open(sys.argv[2], encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    template = env.from_string(config["chat_template"])
    fallback = re.search(r'set date_string = "([^"]+)"', config["chat_template"])
    out = []
    for case in cases:
        context = {
            "messages": case["messages"],
            "add_generation_prompt": case["add_generation_prompt"],
            "bos_token": token(config.get("bos_token")),
            "eos_token": token(config.get("eos_token")),
        }
        if not case.get("serving") and fallback:
            context["date_string"] = fallback.group(1)
        out.append(template.render(**context))
    print(json.dumps(out))


main()
