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

# WordNet's lexicographer files, by the lex_filenum field of data.* lines
# (WordNet 3.0 lexnames(5WN)).
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl")
POS_NAMES = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}


def parse_data_line(line):
    """Return (lemmas, gloss, ss_type, lexname) for one data.* line, or None
    for header lines."""
    if line.startswith("  ") or not line.strip():
        return None  # licence header
    head, sep, gloss = line.partition("| ")
    if not sep:
        return None
    fields = head.split()
    # offset lex_filenum ss_type w_cnt(hex) [word lex_id]*w_cnt ...
    lexname = LEXNAMES[int(fields[1])]
    ss_type = fields[2]
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
    return lemmas, gloss.strip(), ss_type, lexname


def split_gloss(gloss):
    """gloss -> (definition ending in '.', examples text or '')."""
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
    return " ".join(definition.split()), " ".join(examples.split())


def format_entry(entry):
    """entry -> 'w1, w2: definition. "example"; "example"'."""
    text = ", ".join(entry["lemmas"]) + ": " + entry["definition"]
    if entry["examples"]:
        text += " " + entry["examples"]
    return " ".join(text.split())  # collapse any stray whitespace


def read_entries(wordnet_dir):
    entries = []
    for name in POS_FILES:
        path = os.path.join(wordnet_dir, name)
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            for raw in f:
                parsed = parse_data_line(raw.rstrip("\n"))
                if parsed is None:
                    continue
                lemmas, gloss, ss_type, lexname = parsed
                if not gloss:
                    continue
                definition, examples = split_gloss(gloss)
                entries.append({"lemmas": lemmas, "definition": definition, "examples": examples,
                                "pos": POS_NAMES[ss_type], "lexname": lexname})
    return entries


# Chat tasks.  A share of the pretraining examples are short conversations in
# OpenAI chat format, rendered by Burst's chat template at training time, so
# that the base model learns the turn structure (<|im_start|>, <|im_end|>)
# and to answer with one of the labels a system prompt lists.  Without them the
# chat tokens' embeddings would never be trained, and a LoRA fine-tune (which
# freezes embeddings) could not use them.
DEFINE_ASKS = ("Define: {w}", "What does \"{w}\" mean?", "What is the meaning of {w}?",
               "Explain the word {w}.", "{w}?", "Please define {w}.")
WORD_ASKS = ("Which word means: {d}", "Give a word for: {d}", "Name the word defined as: {d}",
             "What is the word? {d}")
POS_SYSTEMS = ("Classify the word into one of: {labels}.",
               "Which part of speech is the word? Answer with one of: {labels}.")
TOPIC_SYSTEMS = ("Classify the text into one of: {labels}.",
                 "Label the text with one of: {labels}.",
                 "Pick the category of the text, one of: {labels}.",
                 "Sort the description into one of these groups: {labels}.")
DICT_SYSTEMS = (None, None, "You are a helpful dictionary.", "Answer briefly.")


def chat(system, user, assistant):
    msgs = []
    if system:
        msgs.append({"role": "system", "content": system})
    msgs.append({"role": "user", "content": user})
    msgs.append({"role": "assistant", "content": assistant})
    return {"messages": msgs}


def make_chats(entries, rng, n):
    """n chat examples drawn from entries (deterministic given rng)."""
    topics = sorted({e["lexname"].split(".")[1] for e in entries
                     if e["lexname"].startswith("noun.") and e["lexname"] != "noun.Tops"})
    pos_labels = sorted(set(POS_NAMES.values()))
    out = []
    for _ in range(n):
        e = entries[rng.randrange(len(entries))]
        w = e["lemmas"][0]
        task = rng.random()
        if task < 0.3:
            out.append(chat(rng.choice(DICT_SYSTEMS), rng.choice(DEFINE_ASKS).format(w=w),
                            e["definition"]))
        elif task < 0.45:
            out.append(chat(rng.choice(DICT_SYSTEMS), rng.choice(WORD_ASKS).format(d=e["definition"]),
                            w))
        elif task < 0.6:
            labels = pos_labels[:]
            rng.shuffle(labels)
            out.append(chat(rng.choice(POS_SYSTEMS).format(labels=", ".join(labels)),
                            w + ": " + e["definition"], e["pos"]))
        else:
            # Topic: a noun's lexicographer file, among 3 to 8 listed labels.
            while not e["lexname"].startswith("noun.") or e["lexname"] == "noun.Tops":
                e = entries[rng.randrange(len(entries))]
            answer = e["lexname"].split(".")[1]
            others = [t for t in topics if t != answer]
            labels = rng.sample(others, rng.randint(2, 7)) + [answer]
            rng.shuffle(labels)
            text = e["definition"]
            if e["examples"] and rng.random() < 0.5:
                text += " " + e["examples"]
            out.append(chat(rng.choice(TOPIC_SYSTEMS).format(labels=", ".join(labels)), text, answer))
    return out


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


def write_jsonl(path, objs):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for o in objs:
            f.write(json.dumps(o, ensure_ascii=False) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default="build/corpus", help="output directory (default build/corpus)")
    ap.add_argument("--max-chars", type=int, default=None,
                    help="optional cap on the total characters of gloss lines kept (default: no cap)")
    ap.add_argument("--seed", type=int, default=1234, help="shuffle seed (default 1234)")
    ap.add_argument("--valid-fraction", type=float, default=0.01,
                    help="share of packed documents held out in valid.jsonl (default 0.01)")
    ap.add_argument("--chat-fraction", type=float, default=0.35,
                    help="share of training examples that are chat tasks (default 0.35; 0 for text only)")
    ap.add_argument("--wordnet-dir", default=WORDNET_DIR, help="WordNet data directory")
    args = ap.parse_args(argv)

    missing = [n for n in POS_FILES if not os.path.isfile(os.path.join(args.wordnet_dir, n))]
    if missing:
        sys.stderr.write("error: %s not found in %s; install it with: apt-get install -y wordnet-base\n"
                         % (", ".join(missing), args.wordnet_dir))
        return 1

    entries = read_entries(args.wordnet_dir)
    random.Random(args.seed).shuffle(entries)
    lines = [format_entry(e) for e in entries]

    if args.max_chars is not None:
        kept, total = [], 0
        for line in lines:
            if total + len(line) > args.max_chars:
                break
            kept.append(line)
            total += len(line)
        lines = kept
        entries = entries[:len(kept)]

    def split(items):
        """(train, valid): the last --valid-fraction of items held out."""
        if args.valid_fraction <= 0 or len(items) < 2:
            return items, []
        n_valid = max(1, min(int(round(len(items) * args.valid_fraction)), len(items) - 1))
        return items[:len(items) - n_valid], items[len(items) - n_valid:]

    docs = [{"text": d} for d in pack(lines)]
    n_chat = 0
    if args.chat_fraction > 0:
        n_chat = int(round(len(docs) * args.chat_fraction / (1 - args.chat_fraction)))
    rng = random.Random(args.seed + 1)
    chats = make_chats(entries, rng, n_chat) if n_chat else []
    train_docs, valid_docs = split(docs)
    train_chats, valid_chats = split(chats)
    train = train_docs + train_chats
    valid = valid_docs + valid_chats
    rng.shuffle(train)
    rng.shuffle(valid)

    os.makedirs(args.out_dir, exist_ok=True)
    txt_path = os.path.join(args.out_dir, "corpus.txt")
    train_path = os.path.join(args.out_dir, "train.jsonl")
    valid_path = os.path.join(args.out_dir, "valid.jsonl")
    write_lines(txt_path, lines)
    write_jsonl(train_path, train)
    write_jsonl(valid_path, valid)

    n, c, w = stats(lines)
    print("%-40s %8d lines %11d characters %10d words" % (txt_path, n, c, w))
    for path, d, ch in ((train_path, train_docs, train_chats), (valid_path, valid_docs, valid_chats)):
        print("%-40s %8d text documents + %d chats" % (path, len(d), len(ch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
