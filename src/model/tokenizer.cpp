#include "model/tokenizer.h"

#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"
#include "model/bpe_tokenizer.h"
#include "model/sp_tokenizer.h"

namespace burst {
namespace {

// tokenizer_config.json writes special tokens as "text" or {"content": "text"}.
std::optional<std::string> TokenText(const Json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

void AddStop(Tokenizer& tok, int id) {
  for (int s : tok.stop_ids)
    if (s == id) return;
  tok.stop_ids.push_back(id);
}

}  // namespace

std::unique_ptr<Tokenizer> LoadTokenizer(const std::filesystem::path& dir) {
  std::unique_ptr<Tokenizer> tok;
  if (std::filesystem::exists(dir / "tokenizer.model")) {
    tok = LoadSentencePieceTokenizer(dir / "tokenizer.model");
  } else if (std::filesystem::exists(dir / "tokenizer.json")) {
    tok = LoadBpeTokenizer(dir / "tokenizer.json");
  } else {
    throw Error(Code::kNotFound,
                dir.string() + ": no tokenizer.model or tokenizer.json in the model folder",
                dir.string());
  }
  auto cfg_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    Json cfg = ParseJson(ReadFile(cfg_path), cfg_path.string());
    auto lookup = [&](const char* key) -> std::optional<int> {
      auto text = TokenText(cfg, key);
      if (!text) return std::nullopt;
      auto id = tok->PieceToId(*text);
      if (!id) {
        throw Error(Code::kInvalidArgument,
                    cfg_path.string() + ": " + key + " \"" + *text + "\" is not in the vocabulary",
                    key);
      }
      return id;
    };
    if (auto id = lookup("bos_token")) tok->bos_id = id;
    if (auto id = lookup("eos_token")) tok->eos_id = id;
    if (auto id = lookup("pad_token")) tok->pad_id = id;
    if (cfg.contains("added_tokens_decoder") && cfg["added_tokens_decoder"].is_object()) {
      for (auto it = cfg["added_tokens_decoder"].begin(); it != cfg["added_tokens_decoder"].end();
           ++it) {
        if (it->value("special", false)) tok->added_special_ids.insert(std::stoi(it.key()));
      }
    }
    if (cfg.contains("chat_template") && cfg["chat_template"].is_string())
      tok->chat_template = cfg["chat_template"].get<std::string>();
  }
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
