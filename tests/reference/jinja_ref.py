"""Renders Jinja templates exactly as transformers' apply_chat_template renders
a chat template: each template is compiled by transformers' own
_compile_jinja_template (Jinja2's ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, loop controls and the {% generation %} block, and
transformers' tojson, raise_exception, dict and namespace) and rendered with
the case's context as its variables. The reference of Burst's Jinja engine
(src/train/jinja_test.cpp).

Usage: .venv/bin/python jinja_ref.py CASES.json
  CASES: [{"template": str, "context": {...}}, ...]
Prints a JSON list, one entry per case: {"ok": true, "text": ...} when it
rendered, or {"ok": false, "error": "<exception class name>: <message>"} when
compiling or rendering raised (raise_exception raises jinja2's TemplateError).
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from transformers.utils.chat_template_utils import _compile_jinja_template  # noqa: E402


def render(case):
    try:
        text = _compile_jinja_template(case["template"]).render(**case.get("context", {}))
        return {"ok": True, "text": text}
    except Exception as e:  # noqa: BLE001 (any failure is an expected outcome to compare)
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def main():
    cases = json.load(open(sys.argv[1], encoding="utf-8"))
    print(json.dumps([render(case) for case in cases]))


main()
