#!/usr/bin/python3
"""Build Burst's tiny English pretraining corpus from WordNet glosses.

Source: the Debian package `wordnet-base` (WordNet 3.0, Princeton University,
licence "WordNet3.0", see /usr/share/doc/wordnet-base/copyright).  Install it
with `apt-get install -y wordnet-base` if /usr/share/wordnet is missing.

For every synset in /usr/share/wordnet/data.{noun,verb,adj,adv} the script takes
the lemma words and the gloss (the text after "| ") and writes one natural
English line, for example:

    dog, domestic dog, Canis familiaris: a member of the genus Canis ... times. "the dog barked all night"

Outputs (in --out-dir, default build/corpus):
    corpus.txt   one gloss line per line (plain text, for sentencepiece training)
    train.jsonl  {"text": ...} documents: consecutive gloss lines packed into
                 documents of roughly 400-800 characters
    valid.jsonl  the same kind of documents, a small held-out share
                 (--valid-fraction, default 0.01; 0 writes an empty file)

The order is deterministic: the lines are shuffled with a fixed seed (--seed)
so nouns, verbs, adjectives and adverbs mix.  Running the script twice gives
byte-identical files.

Usage:
    /usr/bin/python3 scripts/make_corpus.py [--out-dir DIR] [--max-chars N]
"""

import argparse
import json
import os
import random
import re
import sys

WORDNET_DIR = "/usr/share/wordnet"
POS_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
DOC_MIN_CHARS = 400
DOC_MAX_CHARS = 800

# Adjective lemmas may carry a syntactic marker: (a), (p) or (ip).
_MARKER = re.compile(r"\((?:a|p|ip)\)$")


def parse_data_line(line):
    """Return (lemmas, gloss) for one data.* line, or None for header lines."""
    if line.startswith("  ") or not line.strip():
        return None  # licence header
    head, sep, gloss = line.partition("| ")
    if not sep:
        return None
    fields = head.split()
    # offset lex_filenum ss_type w_cnt(hex) [word lex_id]*w_cnt ...
    w_cnt = int(fields[3], 16)
    lemmas = []
    seen = set()
    for i in range(w_cnt):
        word = fields[4 + 2 * i]
        word = _MARKER.sub("", word).replace("_", " ")
        key = word.lower()
        if key not in seen:
            seen.add(key)
            lemmas.append(word)
    return lemmas, gloss.strip()


def format_entry(lemmas, gloss):
    """lemmas + gloss -> 'w1, w2: definition. "example"; "example"'."""
    parts = re.split(r";\s*", gloss)
    first_example = len(parts)
    for i, part in enumerate(parts):
        if part.startswith('"'):
            first_example = i
            break
    definition = "; ".join(p for p in parts[:first_example] if p).strip()
    # Re-join the examples from the original text so that semicolons inside
    # quotes survive unchanged.
    examples = ""
    if first_example < len(parts):
        idx = gloss.find(parts[first_example])
        examples = gloss[idx:].strip()
    definition = definition.rstrip(" ;,")
    if definition and definition[-1] not in ".!?":
        definition += "."
    text = ", ".join(lemmas) + ": " + definition
    if examples:
        text += " " + examples
    return " ".join(text.split())  # collapse any stray whitespace


def read_entries(wordnet_dir):
    lines = []
    for name in POS_FILES:
        path = os.path.join(wordnet_dir, name)
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            for raw in f:
                parsed = parse_data_line(raw.rstrip("\n"))
                if parsed is None:
                    continue
                lemmas, gloss = parsed
                if not gloss:
                    continue
                lines.append(format_entry(lemmas, gloss))
    return lines


def pack(lines):
    """Greedily pack consecutive lines into ~400-800 character documents."""
    docs = []
    cur = []
    cur_len = 0
    for line in lines:
        if cur and cur_len >= DOC_MIN_CHARS and cur_len + 1 + len(line) > DOC_MAX_CHARS:
            docs.append(" ".join(cur))
            cur, cur_len = [], 0
        cur.append(line)
        cur_len += len(line) + (1 if cur_len else 0)
    if cur:
        docs.append(" ".join(cur))
    return docs


def stats(texts):
    return len(texts), sum(len(t) for t in texts), sum(len(t.split()) for t in texts)


def write_lines(path, texts):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for t in texts:
            f.write(t + "\n")


def write_jsonl(path, texts):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default="build/corpus", help="output directory (default build/corpus)")
    ap.add_argument("--max-chars", type=int, default=None,
                    help="optional cap on the total characters of gloss lines kept (default: no cap)")
    ap.add_argument("--seed", type=int, default=1234, help="shuffle seed (default 1234)")
    ap.add_argument("--valid-fraction", type=float, default=0.01,
                    help="share of packed documents held out in valid.jsonl (default 0.01)")
    ap.add_argument("--wordnet-dir", default=WORDNET_DIR, help="WordNet data directory")
    args = ap.parse_args(argv)

    missing = [n for n in POS_FILES if not os.path.isfile(os.path.join(args.wordnet_dir, n))]
    if missing:
        sys.stderr.write("error: %s not found in %s; install it with: apt-get install -y wordnet-base\n"
                         % (", ".join(missing), args.wordnet_dir))
        return 1

    lines = read_entries(args.wordnet_dir)
    random.Random(args.seed).shuffle(lines)

    if args.max_chars is not None:
        kept, total = [], 0
        for line in lines:
            if total + len(line) > args.max_chars:
                break
            kept.append(line)
            total += len(line)
        lines = kept

    docs = pack(lines)
    n_valid = int(round(len(docs) * args.valid_fraction)) if args.valid_fraction > 0 else 0
    if args.valid_fraction > 0 and len(docs) > 1:
        n_valid = max(1, min(n_valid, len(docs) - 1))
    else:
        n_valid = 0
    valid_docs = docs[len(docs) - n_valid:] if n_valid else []
    train_docs = docs[:len(docs) - n_valid]

    os.makedirs(args.out_dir, exist_ok=True)
    txt_path = os.path.join(args.out_dir, "corpus.txt")
    train_path = os.path.join(args.out_dir, "train.jsonl")
    valid_path = os.path.join(args.out_dir, "valid.jsonl")
    write_lines(txt_path, lines)
    write_jsonl(train_path, train_docs)
    write_jsonl(valid_path, valid_docs)

    for path, texts, unit in ((txt_path, lines, "lines"),
                              (train_path, train_docs, "documents"),
                              (valid_path, valid_docs, "documents")):
        n, c, w = stats(texts)
        print("%-40s %8d %s %11d characters %10d words" % (path, n, unit, c, w))
    return 0


if __name__ == "__main__":
    sys.exit(main())
