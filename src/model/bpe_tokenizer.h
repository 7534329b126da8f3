// BpeTokenizer: Hugging Face `tokenizer.json` byte-level BPE (GPT-2, Llama 3,
// Qwen), implemented in Burst (no packaged library exists).
//
// Owns the vocabulary, merge ranks, added tokens and the pre-tokenizer
// regexes (compiled with PCRE2, which has \p{L} classes and lookahead).
// Thread-safety: immutable after loading; Encode/Decode are const and safe
// to call concurrently (PCRE2 scratch space is per thread).
// Errors: LoadBpeTokenizer throws burst::Error with the file path as param:
// kNotFound for a missing file, kInvalidArgument for malformed JSON or fields,
// kUnimplemented for tokenizer.json features outside byte-level BPE; the
// message names the file and the field ("pre_tokenizer.type Metaspace").
//
// What is supported (any other model, normalizer, pre-tokenizer or decoder is
// rejected with kUnimplemented rather than approximated):
//   model:          type BPE, vocab, merges ("a b" or ["a", "b"]), ignore_merges,
//                   unk_token; byte_fallback false, no dropout, no subword affixes.
//   normalizer:     null or NFC (utf8proc's composition, as Hugging Face's).
//   pre_tokenizer:  ByteLevel, or Sequence of Split (Regex or String pattern, any
//                   behavior, invert) ending with ByteLevel (use_regex and
//                   add_prefix_space honoured).
//   decoder:        ByteLevel.
//   post_processor, truncation, padding: ignored; Encode never adds BOS/EOS
//                   (see tokenizer.h) and callers handle lengths.
//   added_tokens:   matched leftmost-longest before pre-tokenization; the
//                   special ones only when allow_special (Hugging Face's
//                   split_special_tokens otherwise), the others, such as
//                   Qwen 3's <think>, always. lstrip/rstrip strip ASCII whitespace;
//                   single_word treats ASCII alphanumerics, '_' and all
//                   non-ASCII as word characters (Hugging Face uses Unicode \w).
//
// Limitations:
//   - NFC comes from utf8proc (Debian 12's 2.6); Hugging Face's Rust
//     tokenizers and its JS port use their own tables, which agree on every
//     text the reference tests try, decomposed accents and Hangul included.
//     A section that is not valid UTF-8 is tokenized without normalizing.
//   - Decode returns the raw bytes of the tokens. Ids that split a multi-byte
//     character give incomplete UTF-8 (Hugging Face substitutes U+FFFD);
//     streaming callers can rely on this to hold back a partial character.
//     Unknown ids are skipped, as Hugging Face does.
//   - The patterns are written for Oniguruma; PCRE2 compiles them with \s
//     written out as Oniguruma's class (PCRE2's own also takes U+180E).
//     With that, GPT-2's, Llama 3's and Qwen 3's split every Unicode code
//     point as Oniguruma 6.9.8 does (bpe_onig_test); PCRE2 10.42's tables
//     are Unicode 14, so characters assigned later may still differ.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer.h"

namespace burst {

class BpeTokenizer;
// Loads tokenizer.json. kind = "bpe"; bos_id, eos_id, stop_ids and
// chat_template stay unset (LoadTokenizer fills them from tokenizer_config.json).
std::unique_ptr<Tokenizer> LoadBpeTokenizer(const std::filesystem::path& tokenizer_json);
// The same from the file's text; `name` stands for the file in errors.
std::unique_ptr<Tokenizer> LoadBpeTokenizerFromBytes(std::string_view json_text, const std::string& name);
// `text` in Unicode's NFC (utf8proc), as the NFC normalizer makes it; text
// that is not valid UTF-8 comes back unchanged.
std::string NfcNormalize(std::string_view text);
// The pieces the pre-tokenizer splits `text` into, before the byte-level
// mapping and without the normalizer (Hugging Face's pre_tokenize_str);
// empty for a tokenizer that is not byte-level BPE.
std::vector<std::string> BpePreTokenize(const Tokenizer& tokenizer, std::string_view text);

}  // namespace burst
