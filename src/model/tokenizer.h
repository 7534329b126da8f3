// Tokenizer: text <-> token ids for a model folder.
//
// Two implementations: SentencePiece `tokenizer.model` (sp_tokenizer.h) and
// Hugging Face byte-level BPE `tokenizer.json` (bpe_tokenizer.h, GPT-2 /
// Llama 3 / Qwen style). LoadTokenizer() picks by the files a Hugging Face
// folder holds and fills the special-token ids from tokenizer_config.json.
//
// Encode never adds BOS/EOS by itself; callers (chat templates, data loading)
// add them explicitly, so what a model sees is visible in one place.
//
// Errors: loaders throw burst::Error naming the file. Thread-safety: a loaded
// tokenizer is immutable; Encode/Decode may be called from several threads.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace burst {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Plain text to ids. With allow_special, added/special tokens written in the
  // text ("<|im_start|>") become their ids; without, they are encoded as text.
  virtual std::vector<int> Encode(std::string_view text, bool allow_special = false) const = 0;
  // Ids to text. skip_special drops control/special tokens.
  virtual std::string Decode(const std::vector<int>& ids, bool skip_special = false) const = 0;
  // The vocabulary entry of an id, as stored in the tokenizer file.
  virtual std::string IdToPiece(int id) const = 0;
  // The id of a vocabulary entry or special token; nullopt when absent.
  virtual std::optional<int> PieceToId(std::string_view piece) const = 0;
  virtual int vocab_size() const = 0;
  // Whether id is a special/control token (bos, eos, <|im_start|>, ...).
  virtual bool IsSpecial(int id) const = 0;
  // The texts that Encode turns into their special token only with
  // allow_special (a chat template's control tokens), as (text, id).
  virtual std::vector<std::pair<std::string, int>> SpecialTexts() const = 0;

  std::optional<int> bos_id;
  std::optional<int> eos_id;
  std::optional<int> pad_id;
  // Extra ids that end generation (e.g. <|eot_id|>, <|im_end|>).
  std::vector<int> stop_ids;
  // The chat template: chat_template.jinja, else tokenizer_config.json's
  // chat_template (its "default" entry when a list).
  std::string chat_template;
  // Ids listed as special in tokenizer_config.json's added_tokens_decoder.
  std::set<int> added_special_ids;
  // "sentencepiece" or "bpe".
  std::string kind;
};

// Loads the tokenizer of a Hugging Face model folder: tokenizer.model
// (SentencePiece) when present, else tokenizer.json (byte-level BPE).
std::unique_ptr<Tokenizer> LoadTokenizer(const std::filesystem::path& model_dir);

// Applies tokenizer_config.json's text (`where` names it in errors) to a
// loaded tokenizer: bos/eos/pad ids, added_special_ids, chat_template.
// Throws kInvalidArgument naming the field for a wrong type, a token not in
// the vocabulary or a key that is not an id.
void ApplyTokenizerConfig(Tokenizer& tokenizer, std::string_view text, const std::string& where);

}  // namespace burst
