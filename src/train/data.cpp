#include "train/data.h"

#include <sstream>

#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"

namespace burst {
namespace {

struct LineContext {
  std::string where;  // "file:line"
  int line = 0;
};

[[noreturn]] void Fail(const LineContext& at, const std::string& field, const std::string& msg) {
  throw Error(Code::kInvalidArgument, at.where + ": " + (field.empty() ? "" : field + ": ") + msg,
              field.empty() ? at.where : field);
}

std::string RequireString(const Json& obj, const std::string& key, const LineContext& at,
                          const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) Fail(at, path, "missing");
  if (!it->is_string()) Fail(at, path, "must be a string, got " + it->dump());
  return it->get<std::string>();
}

std::vector<ChatMessage> ParseMessages(const Json& msgs, const LineContext& at,
                                       const std::string& path) {
  if (!msgs.is_array() || msgs.empty()) Fail(at, path, "must be a non-empty list of messages");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Json& m = msgs[i];
    std::string p = path + "[" + std::to_string(i) + "]";
    if (!m.is_object()) Fail(at, p, "must be an object with role and content");
    ChatMessage cm;
    cm.role = RequireString(m, "role", at, p + ".role");
    if (cm.role != "system" && cm.role != "user" && cm.role != "assistant") {
      Fail(at, p + ".role", "unknown role \"" + cm.role + "\" (system, user, assistant)");
    }
    cm.content = RequireString(m, "content", at, p + ".content");
    if (m.contains("weight")) {
      const Json& w = m["weight"];
      if (!w.is_number() || (w.get<double>() != 0 && w.get<double>() != 1))
        Fail(at, p + ".weight", "must be 0 or 1");
      if (cm.role != "assistant") Fail(at, p + ".weight", "only assistant messages take a weight");
      cm.weight = static_cast<float>(w.get<double>());
    }
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (it.key() != "role" && it.key() != "content" && it.key() != "weight" && it.key() != "name")
        Fail(at, p + "." + it.key(), "unknown field");
    }
    out.push_back(std::move(cm));
  }
  return out;
}

// Encodes text, with BOS in front when the tokenizer has one.
std::vector<int> WithBos(const Tokenizer& tok, const std::vector<int>& ids) {
  std::vector<int> out;
  if (tok.bos_id) out.push_back(*tok.bos_id);
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

int EosId(const Tokenizer& tok, const LineContext& at) {
  if (!tok.eos_id) Fail(at, "", "the tokenizer defines no eos_token; completions need one");
  return *tok.eos_id;
}

bool ApplyLength(Example& ex, const DataOptions& opt, const LineContext& at, DataStats& stats) {
  if (static_cast<int64_t>(ex.ids.size()) > opt.max_seq_len) {
    if (!opt.truncate) {
      Fail(at, "", std::to_string(ex.ids.size()) + " tokens exceed max_seq_len " +
                       std::to_string(opt.max_seq_len) + " (set \"truncate\": true to cut them)");
    }
    ex.ids.resize(static_cast<size_t>(opt.max_seq_len));
    ex.weights.resize(static_cast<size_t>(opt.max_seq_len));
    ++stats.truncated;
  }
  bool any = false;
  for (size_t t = 1; t < ex.weights.size(); ++t) any |= ex.weights[t] > 0;
  return any;
}

template <typename Fn>
std::string ForEachLine(const std::filesystem::path& path, Fn&& fn) {
  if (!std::filesystem::exists(path)) {
    throw Error(Code::kNotFound, "data file " + path.string() + " does not exist", path.string());
  }
  std::string data = ReadFile(path);
  std::istringstream in(data);
  std::string line;
  int n = 0, nonblank = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    ++nonblank;
    LineContext at{path.string() + ":" + std::to_string(n), n};
    Json j;
    try {
      j = Json::parse(line);
    } catch (const Json::parse_error& e) {
      std::string what = e.what();
      if (auto p = what.find("parse error"); p != std::string::npos) what = what.substr(p);
      Fail(at, "", "invalid JSON: " + what);
    }
    if (!j.is_object()) Fail(at, "", "each line must be a JSON object");
    fn(j, at);
  }
  if (nonblank == 0) {
    throw Error(Code::kInvalidArgument, path.string() + ": the file has no examples",
                path.string());
  }
  return Sha256Hex(data);
}

void CheckOnly(const Json& j, const std::vector<std::string>& allowed, const LineContext& at) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const auto& a : allowed) ok |= it.key() == a;
    if (!ok) Fail(at, it.key(), "unknown field for this line's format");
  }
}

}  // namespace

Dataset LoadSupervised(const std::filesystem::path& path, const Tokenizer& tok,
                       const DataOptions& opt) {
  Dataset ds;
  std::optional<ChatTemplate> tmpl;
  std::string format;
  ds.sha256 = ForEachLine(path, [&](const Json& j, const LineContext& at) {
    Example ex;
    ex.line = at.line;
    std::string kind;
    if (j.contains("messages")) {
      kind = "messages";
      CheckOnly(j, {"messages", "metadata", "tools", "parallel_tool_calls"}, at);
      auto msgs = ParseMessages(j["messages"], at, "messages");
      bool has_assistant = false;
      for (const auto& m : msgs) has_assistant |= m.role == "assistant";
      if (!has_assistant) Fail(at, "messages", "has no assistant message to train on");
      if (!tmpl) tmpl = ResolveChatTemplate(opt.chat_template, tok);
      RenderedChat r = RenderChat(msgs, *tmpl, tok, /*add_generation_prompt=*/false);
      ex.ids = std::move(r.ids);
      ex.weights = std::move(r.weights);
      if (msgs.back().role == "assistant") {
        ex.prompt_ids.assign(ex.ids.begin(), ex.ids.begin() + static_cast<long>(r.prompt_len));
        ex.completion_ids = std::move(r.completion_ids);
      }
    } else if (j.contains("prompt") || j.contains("completion")) {
      kind = "prompt_completion";
      if (j.contains("chosen") || j.contains("rejected"))
        Fail(at, "chosen", "preference data needs \"loss\": \"dpo\"");
      CheckOnly(j, {"prompt", "completion", "metadata"}, at);
      std::string prompt = RequireString(j, "prompt", at, "prompt");
      std::string completion = RequireString(j, "completion", at, "completion");
      if (completion.empty()) Fail(at, "completion", "is empty");
      ex.ids = WithBos(tok, tok.Encode(prompt));
      ex.weights.assign(ex.ids.size(), 0.0f);
      ex.prompt_ids = ex.ids;
      ex.completion_ids = tok.Encode(completion);
      ex.completion_ids.push_back(EosId(tok, at));
      ex.ids.insert(ex.ids.end(), ex.completion_ids.begin(), ex.completion_ids.end());
      ex.weights.resize(ex.ids.size(), 1.0f);
    } else if (j.contains("text")) {
      kind = "text";
      CheckOnly(j, {"text", "metadata"}, at);
      std::string text = RequireString(j, "text", at, "text");
      if (text.empty()) Fail(at, "text", "is empty");
      ex.ids = WithBos(tok, tok.Encode(text));
      if (tok.eos_id) ex.ids.push_back(*tok.eos_id);
      ex.weights.assign(ex.ids.size(), 1.0f);
      if (tok.bos_id) ex.weights[0] = 0.0f;
    } else if (j.contains("input") || j.contains("chosen")) {
      Fail(at, "", "this is preference (DPO) data; set \"loss\": \"dpo\" to train on it");
    } else {
      Fail(at, "", "expected \"messages\", \"prompt\"+\"completion\" or \"text\"");
    }
    if (format.empty()) format = kind;
    if (format != kind) format = "mixed";
    if (!ApplyLength(ex, opt, at, ds.stats)) {
      ++ds.stats.skipped;
      return;
    }
    ds.stats.tokens += static_cast<int64_t>(ex.ids.size());
    for (size_t t = 1; t < ex.weights.size(); ++t) ds.stats.loss_tokens += ex.weights[t] > 0;
    ds.stats.max_len = std::max<int64_t>(ds.stats.max_len, static_cast<int64_t>(ex.ids.size()));
    ds.examples.push_back(std::move(ex));
  });
  ds.stats.examples = static_cast<int64_t>(ds.examples.size());
  ds.stats.format = format;
  if (ds.examples.empty()) {
    throw Error(Code::kInvalidArgument,
                path.string() + ": no example has a loss token left after truncation to " +
                    std::to_string(opt.max_seq_len) + " tokens",
                path.string());
  }
  return ds;
}

Dataset LoadPreferences(const std::filesystem::path& path, const Tokenizer& tok,
                        const DataOptions& opt) {
  Dataset ds;
  std::optional<ChatTemplate> tmpl;
  ds.sha256 = ForEachLine(path, [&](const Json& j, const LineContext& at) {
    PreferenceExample ex;
    ex.line = at.line;
    if (j.contains("input")) {
      CheckOnly(j, {"input", "preferred_output", "non_preferred_output", "metadata"}, at);
      if (!j["input"].is_object() || !j["input"].contains("messages"))
        Fail(at, "input.messages", "missing");
      auto msgs = ParseMessages(j["input"]["messages"], at, "input.messages");
      if (!tmpl) tmpl = ResolveChatTemplate(opt.chat_template, tok);
      ex.prompt_ids = RenderChat(msgs, *tmpl, tok, /*add_generation_prompt=*/true).ids;
      auto completion = [&](const char* key) {
        if (!j.contains(key)) Fail(at, key, "missing");
        auto out = ParseMessages(j[key], at, key);
        if (out.size() != 1 || out[0].role != "assistant")
          Fail(at, key, "must hold exactly one assistant message");
        std::vector<int> ids = tok.Encode(out[0].content);
        ids.push_back(EndOfTurnId(*tmpl, tok));
        return ids;
      };
      ex.chosen_ids = completion("preferred_output");
      ex.rejected_ids = completion("non_preferred_output");
    } else if (j.contains("chosen") || j.contains("rejected")) {
      CheckOnly(j, {"prompt", "chosen", "rejected", "metadata"}, at);
      ex.prompt_ids = WithBos(tok, tok.Encode(RequireString(j, "prompt", at, "prompt")));
      ex.chosen_ids = tok.Encode(RequireString(j, "chosen", at, "chosen"));
      ex.rejected_ids = tok.Encode(RequireString(j, "rejected", at, "rejected"));
      ex.chosen_ids.push_back(EosId(tok, at));
      ex.rejected_ids.push_back(EosId(tok, at));
    } else {
      Fail(at, "", "expected preference data: \"input\"+\"preferred_output\"+"
                   "\"non_preferred_output\" or \"prompt\"+\"chosen\"+\"rejected\"");
    }
    size_t longest = ex.prompt_ids.size() + std::max(ex.chosen_ids.size(), ex.rejected_ids.size());
    if (static_cast<int64_t>(longest) > opt.max_seq_len) {
      if (!opt.truncate) {
        Fail(at, "", std::to_string(longest) + " tokens exceed max_seq_len " +
                         std::to_string(opt.max_seq_len));
      }
      size_t room = static_cast<size_t>(opt.max_seq_len) - std::min<size_t>(ex.prompt_ids.size(), opt.max_seq_len);
      if (room == 0) {
        ++ds.stats.skipped;
        return;
      }
      if (ex.chosen_ids.size() > room) ex.chosen_ids.resize(room);
      if (ex.rejected_ids.size() > room) ex.rejected_ids.resize(room);
      ++ds.stats.truncated;
    }
    ds.stats.tokens += static_cast<int64_t>(2 * ex.prompt_ids.size() + ex.chosen_ids.size() +
                                            ex.rejected_ids.size());
    ds.stats.loss_tokens += static_cast<int64_t>(ex.chosen_ids.size() + ex.rejected_ids.size());
    ds.stats.max_len = std::max<int64_t>(ds.stats.max_len, static_cast<int64_t>(longest));
    ds.pairs.push_back(std::move(ex));
  });
  ds.stats.examples = static_cast<int64_t>(ds.pairs.size());
  ds.stats.format = "preference";
  if (ds.pairs.empty()) throw Error(Code::kInvalidArgument, path.string() + ": no usable pairs", path.string());
  return ds;
}

}  // namespace burst
