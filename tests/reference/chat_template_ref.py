"""Renders chat conversations with a model's own chat_template by
transformers' apply_chat_template itself: the tokenizer is loaded from the
folder holding TOKENIZER_CONFIG.json (its tokenizer.json beside it) with
AutoTokenizer.from_pretrained, offline.

Usage: .venv/bin/python chat_template_ref.py TOKENIZER_CONFIG.json CASES.json
  CASES: [{"messages": [...], "add_generation_prompt": bool, "serving": bool,
           "kwargs": {...}}, ...]
A case not "serving" renders with the template's default date (its
date_string, passed as a template variable); a serving one with
strftime_now (today, UTC); "kwargs" are more template variables
(enable_thinking). Prints a JSON list of the rendered strings.
"""
import json
import os
import re
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from transformers import AutoTokenizer  # noqa: E402


def main():
    folder = os.path.dirname(os.path.abspath(sys.argv[1]))
    cases = json.load(open(sys.argv[2], encoding="utf-8"))
    tok = AutoTokenizer.from_pretrained(folder)
    fallback = re.search(r'set date_string = "([^"]+)"', tok.chat_template or "")
    out = []
    for case in cases:
        extra = dict(case.get("kwargs", {}))
        if not case.get("serving") and fallback:
            extra["date_string"] = fallback.group(1)
        out.append(tok.apply_chat_template(case["messages"], tokenize=False,
                                           add_generation_prompt=case["add_generation_prompt"], **extra))
    print(json.dumps(out))


main()
