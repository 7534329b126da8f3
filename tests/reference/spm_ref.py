#!/usr/bin/python3
"""Reference SentencePiece encoding/decoding for Burst's sp_tokenizer tests.

Uses the real sentencepiece library (Debian's python3-sentencepiece) in its
own process: Burst cannot load libsentencepiece next to libtorch (their
protobuf runtimes clash), so its tokenizer is a re-implementation that these
outputs check.

Usage:
  /usr/bin/python3 tests/reference/spm_ref.py MODEL TEXTS_JSON [IDS_JSON]

TEXTS_JSON: a JSON array; each item is a string, or {"hex": "..."} for raw
  bytes (invalid UTF-8 cannot be written as a JSON string).
IDS_JSON (optional): a JSON array of id lists to decode.

Prints one JSON object:
  info:    vocab_size, unk_id, bos_id, eos_id, pad_id (-1 when absent, as the
           library reports them), and per-id "types" as single letters
           (n normal, u unknown, c control, d user-defined, x unused, b byte;
           the Python API cannot tell user-defined pieces, so those come from
           the model file's protobuf wire format, read here independently).
  ids:     for each text, sp.encode(text) (no BOS/EOS added, no sampling).
  decoded: for each id list of IDS_JSON (when given), three strings:
    "plain":        sp.decode(ids).
    "keep_control": how Burst's Decode(ids, skip_special=false) spells it:
                    the ids are split at control ids, each run is decoded with
                    sp.decode and each control id is written as its piece.
    "skip_special": sp.decode of the ids that are not control, unknown or
                    user-defined (Burst's Decode(ids, skip_special=true) with
                    no added_special_ids).
  Ids outside the vocabulary are dropped first, as Burst's Decode does.
"""
import json
import sys

import sentencepiece as spm


def load_texts(path):
    with open(path, "r", encoding="utf-8") as f:
        items = json.load(f)
    if not isinstance(items, list):
        sys.exit(f"{path}: expected a JSON array")
    texts = []
    for item in items:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict) and isinstance(item.get("hex"), str):
            texts.append(bytes.fromhex(item["hex"]))
        else:
            sys.exit(f"{path}: each item must be a string or {{\"hex\": ...}}")
    return texts


def varint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def fields(buf):
    """Yields (field number, wire type, value) of one protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def user_defined_ids(model_bytes):
    """Ids of ModelProto.pieces (field 1) whose type (field 3) is USER_DEFINED (4)."""
    ids = []
    index = 0
    for number, wire, value in fields(model_bytes):
        if number == 1 and wire == 2:
            for n, w, v in fields(value):
                if n == 3 and w == 0 and v == 4:
                    ids.append(index)
            index += 1
    return ids


def piece_type(sp, i):
    if sp.is_unknown(i):
        return "u"
    if sp.is_control(i):
        return "c"
    if sp.is_unused(i):
        return "x"
    if sp.is_byte(i):
        return "b"
    return "n"


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: spm_ref.py MODEL TEXTS_JSON [IDS_JSON]")
    sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
    n = sp.get_piece_size()

    # The Python API has no is_user_defined() and Debian has no python3-protobuf
    # for sentencepiece_model_pb2, so read the piece types from the wire format.
    types = [piece_type(sp, i) for i in range(n)]
    with open(sys.argv[1], "rb") as f:
        user_defined = user_defined_ids(f.read())
    for i in user_defined:
        types[i] = "d"

    out = {
        "info": {
            "vocab_size": n,
            "unk_id": sp.unk_id(),
            "bos_id": sp.bos_id(),
            "eos_id": sp.eos_id(),
            "pad_id": sp.pad_id(),
            "types": "".join(types),
        },
        "ids": [sp.encode(t) for t in load_texts(sys.argv[2])],
    }

    if len(sys.argv) == 4:
        with open(sys.argv[3], "r", encoding="utf-8") as f:
            id_lists = json.load(f)
        decoded = []
        for ids in id_lists:
            ids = [i for i in ids if 0 <= i < n]
            keep, run = "", []
            for i in ids:
                if types[i] == "c":
                    keep += (sp.decode(run) if run else "") + sp.id_to_piece(i)
                    run = []
                else:
                    run.append(i)
            keep += sp.decode(run) if run else ""
            skip = [i for i in ids if types[i] not in ("c", "u", "d")]
            decoded.append({
                "plain": sp.decode(ids) if ids else "",
                "keep_control": keep,
                "skip_special": sp.decode(skip) if skip else "",
            })
        out["decoded"] = decoded

    sys.stdout.write(json.dumps(out, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()
