#!/usr/bin/python3
"""Writes tests/fixtures/tiny-bpe: a byte-level BPE tokenizer.json small
enough for fast tests (vocab ~300), in the GPT-2 / Qwen layout, with ChatML
special tokens. Deterministic: run it again and the files are identical.

    /usr/bin/python3 scripts/make_test_tokenizer.py
"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "tiny-bpe")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def main():
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = []
    # A few merges so BPE does something: common English pairs.
    for pair in ["Ġ t", "h e", "Ġ a", "i n", "Ġt he", "e r", "o n", "r e", "Ġ s", "e d",
                 "Ġ c", "Ġ b", "Ġ o", "i s", "a r", "e s", "o r", "a n", "Ġ w", "in g"]:
        a, b = pair.split(" ")
        merged = a + b
        merges.append(pair)
        if merged not in vocab:
            vocab[merged] = len(vocab)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    added = []
    for s in specials:
        added.append({"id": len(vocab), "content": s, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
        vocab_id = len(vocab)
        vocab[s] = vocab_id
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {k: v for k, v in vocab.items() if k not in specials},
                  "merges": merges},
    }
    cfg = {
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "added_tokens_decoder": {str(a["id"]): {k: a[k] for k in a if k != "id"} for a in added},
        "chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
        "model_max_length": 512,
    }
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(OUT, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", os.path.normpath(OUT), "vocab", len(vocab))


if __name__ == "__main__":
    main()
