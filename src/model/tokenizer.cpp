#include "model/tokenizer.h"

#include <charconv>

#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"
#include "model/bpe_tokenizer.h"
#include "model/sp_tokenizer.h"

namespace burst {
namespace {

// tokenizer_config.json writes special tokens as "text" or {"content": "text"}.
std::optional<std::string> TokenText(const Json& cfg, const char* key, const std::string& where) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  throw Error(Code::kInvalidArgument,
              where + ": " + key + " must be a string or {\"content\": string}, got " + JsonPreview(*it),
              key);
}

void AddStop(Tokenizer& tok, int id) {
  for (int s : tok.stop_ids)
    if (s == id) return;
  tok.stop_ids.push_back(id);
}

}  // namespace

void ApplyTokenizerConfig(Tokenizer& tok, std::string_view text, const std::string& where) {
  const Json cfg = ParseJson(text, where);
  if (!cfg.is_object()) throw Error(Code::kInvalidArgument, where + ": must be a JSON object", where);
  auto lookup = [&](const char* key) -> std::optional<int> {
    auto piece = TokenText(cfg, key, where);
    if (!piece) return std::nullopt;
    auto id = tok.PieceToId(*piece);
    if (!id) {
      throw Error(Code::kInvalidArgument, where + ": " + key + " \"" + *piece + "\" is not in the vocabulary",
                  key);
    }
    return id;
  };
  if (auto id = lookup("bos_token")) tok.bos_id = id;
  if (auto id = lookup("eos_token")) tok.eos_id = id;
  if (auto id = lookup("pad_token")) tok.pad_id = id;
  if (auto added = cfg.find("added_tokens_decoder"); added != cfg.end() && added->is_object()) {
    for (auto it = added->begin(); it != added->end(); ++it) {
      const std::string field = "added_tokens_decoder." + it.key();
      // Keys are ids in decimal; std::stoi would throw its own exception
      // (or accept "12abc").
      int id = 0;
      const auto [end, ec] = std::from_chars(it.key().data(), it.key().data() + it.key().size(), id);
      if (ec != std::errc() || end != it.key().data() + it.key().size() || id < 0) {
        throw Error(Code::kInvalidArgument, where + ": " + field + " is not a token id", field);
      }
      const auto special = it->is_object() ? it->find("special") : it->end();
      if (!it->is_object() || (special != it->end() && !special->is_boolean())) {
        throw Error(Code::kInvalidArgument,
                    where + ": " + field + " must be an object whose special is true or false", field);
      }
      // An id beyond this tokenizer's vocabulary (tokens that only the
      // tokenizer.json of the same folder defines) can never be produced.
      if (special != it->end() && special->get<bool>() && id < tok.vocab_size())
        tok.added_special_ids.insert(id);
    }
  }
  // A string, or (several templates) a list of {name, template}: the one
  // named "default" is what apply_chat_template uses.
  if (auto t = cfg.find("chat_template"); t != cfg.end() && !t->is_null()) {
    if (t->is_string()) {
      tok.chat_template = t->get<std::string>();
    } else if (t->is_array()) {
      for (const Json& named : *t) {
        if (!named.is_object() || !named.contains("name") || !named.contains("template") ||
            !named["name"].is_string() || !named["template"].is_string())
          throw Error(Code::kInvalidArgument,
                      where + ": chat_template entries must be {name, template} strings", "chat_template");
        if (named["name"] == "default") tok.chat_template = named["template"].get<std::string>();
      }
    } else {
      throw Error(Code::kInvalidArgument, where + ": chat_template must be a string or a list",
                  "chat_template");
    }
  }
}

std::unique_ptr<Tokenizer> LoadTokenizer(const std::filesystem::path& dir) {
  std::unique_ptr<Tokenizer> tok;
  if (std::filesystem::exists(dir / "tokenizer.model")) {
    tok = LoadSentencePieceTokenizer(dir / "tokenizer.model");
  } else if (std::filesystem::exists(dir / "tokenizer.json")) {
    tok = LoadBpeTokenizer(dir / "tokenizer.json");
  } else {
    throw Error(Code::kNotFound, dir.string() + ": no tokenizer.model or tokenizer.json in the model folder",
                dir.string());
  }
  auto cfg_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    ApplyTokenizerConfig(*tok, ReadFile(cfg_path), cfg_path.string());
  }
  // transformers writes the template to its own file now, and reads it first.
  if (auto jinja = dir / "chat_template.jinja"; std::filesystem::exists(jinja))
    tok->chat_template = ReadFile(jinja);
  if (tok->eos_id) AddStop(*tok, *tok->eos_id);
  // generation_config.json / config.json may list several end-of-turn ids.
  for (const char* name : {"generation_config.json", "config.json"}) {
    auto path = dir / name;
    if (!std::filesystem::exists(path)) continue;
    Json j = ParseJson(ReadFile(path), path.string());
    if (!j.contains("eos_token_id")) continue;
    const Json& e = j["eos_token_id"];
    if (e.is_number_integer()) AddStop(*tok, e.get<int>());
    if (e.is_array())
      for (const auto& x : e)
        if (x.is_number_integer()) AddStop(*tok, x.get<int>());
  }
  return tok;
}

}  // namespace burst
