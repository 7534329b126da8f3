#include "train/data.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>

#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"
#include "core/utf8.h"

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

// A conversation the model's template refuses (its raise_exception: "roles
// must alternate") is an error of its line.
RenderedChat RenderAt(const LineContext& at, const std::function<RenderedChat()>& render) {
  try {
    return render();
  } catch (const Error& e) {
    if (e.status().param() != "messages") throw;
    Fail(at, "messages", e.status().message());
  }
}

std::string RequireString(const Json& obj, const std::string& key, const LineContext& at,
                          const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) Fail(at, path, "missing");
  if (!it->is_string()) Fail(at, path, "must be a string, got " + JsonPreview(*it));
  return it->get<std::string>();
}

std::vector<ChatMessage> ParseMessages(const Json& msgs, const LineContext& at, const std::string& path) {
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
      Fail(at, "",
           std::to_string(ex.ids.size()) + " tokens exceed max_seq_len " + std::to_string(opt.max_seq_len) +
               " (set \"truncate\": true to cut them)");
    }
    ex.ids.resize(static_cast<size_t>(opt.max_seq_len));
    ex.weights.resize(static_cast<size_t>(opt.max_seq_len));
    ++stats.truncated;
  }
  bool any = false;
  for (size_t t = 1; t < ex.weights.size(); ++t) any |= ex.weights[t] > 0;
  return any;
}

// Calls fn(json, at) for every non-blank line of `data` (named `name` in
// errors); returns the sha256 of the bytes.
template <typename Fn>
std::string ForEachLineOf(std::string_view data, const std::string& name, Fn&& fn) {
  int n = 0, nonblank = 0;
  std::string line;
  // Lines are taken from the bytes in place (an upload's can be hundreds of
  // MiB, mapped from a file): one line is copied at a time.
  for (size_t pos = 0; pos < data.size();) {
    size_t end = data.find('\n', pos);
    if (end == std::string_view::npos) end = data.size();
    line.assign(data.substr(pos, end - pos));
    pos = end + 1;
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    ++nonblank;
    LineContext at{name + ":" + std::to_string(n), n};
    // Checked before parsing: a deeply nested line would overflow the stack
    // when its value is copied or destroyed.
    if (auto deep = JsonDepthExceededAt(line)) {
      Fail(at, "",
           "JSON nested deeper than the limit of " + std::to_string(kMaxJsonDepth) + " levels (at byte " +
               std::to_string(*deep) + ")");
    }
    Json j;
    try {
      j = Json::parse(line);
    } catch (const Json::exception& e) {
      // parse_error, or out_of_range for a number beyond a double ("1e400").
      std::string what = e.what();
      if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
      Fail(at, "", "invalid JSON: " + ToValidUtf8(what));
    }
    if (!j.is_object()) Fail(at, "", "each line must be a JSON object");
    fn(j, at);
  }
  if (nonblank == 0) throw Error(Code::kInvalidArgument, name + ": the file has no examples", name);
  return Sha256Hex(data);
}

std::string ReadDataFile(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) {
    throw Error(Code::kNotFound, "data file " + path.string() + " does not exist", path.string());
  }
  return ReadFile(path);
}

void CheckOnly(const Json& j, const std::vector<std::string>& allowed, const LineContext& at) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const auto& a : allowed) ok |= it.key() == a;
    if (!ok) Fail(at, it.key(), "unknown field for this line's format");
  }
}

// ----------------------------------------------------------------------------
// one line, checked field by field (no tokenizer needed)

bool IsPreferenceLine(const Json& j) {
  return j.contains("input") || j.contains("chosen") || j.contains("rejected") ||
         j.contains("preferred_output") || j.contains("non_preferred_output");
}

struct SupervisedLine {
  std::string kind;  // messages | prompt_completion | text
  std::vector<ChatMessage> messages;
  std::string prompt, completion, text;
};

SupervisedLine ParseSupervisedLine(const Json& j, const LineContext& at) {
  SupervisedLine out;
  if (j.contains("messages")) {
    out.kind = "messages";
    CheckOnly(j, {"messages", "metadata", "tools", "parallel_tool_calls"}, at);
    out.messages = ParseMessages(j["messages"], at, "messages");
    bool has_assistant = false;
    for (const auto& m : out.messages) has_assistant |= m.role == "assistant";
    if (!has_assistant) Fail(at, "messages", "has no assistant message to train on");
  } else if (j.contains("prompt") || j.contains("completion")) {
    out.kind = "prompt_completion";
    CheckOnly(j, {"prompt", "completion", "metadata"}, at);
    out.prompt = RequireString(j, "prompt", at, "prompt");
    out.completion = RequireString(j, "completion", at, "completion");
    if (out.completion.empty()) Fail(at, "completion", "is empty");
  } else if (j.contains("text")) {
    out.kind = "text";
    CheckOnly(j, {"text", "metadata"}, at);
    out.text = RequireString(j, "text", at, "text");
    if (out.text.empty()) Fail(at, "text", "is empty");
  } else {
    Fail(at, "", "expected \"messages\", \"prompt\"+\"completion\" or \"text\"");
  }
  return out;
}

struct PreferenceLine {
  std::vector<ChatMessage> prompt_messages;  // OpenAI DPO format
  std::string prompt;                        // {"prompt", "chosen", "rejected"}
  std::string chosen, rejected;
  bool chat = false;
};

PreferenceLine ParsePreferenceLine(const Json& j, const LineContext& at) {
  PreferenceLine out;
  if (j.contains("input")) {
    out.chat = true;
    CheckOnly(j, {"input", "preferred_output", "non_preferred_output", "metadata"}, at);
    if (!j["input"].is_object() || !j["input"].contains("messages")) Fail(at, "input.messages", "missing");
    out.prompt_messages = ParseMessages(j["input"]["messages"], at, "input.messages");
    auto completion = [&](const char* key) {
      if (!j.contains(key)) Fail(at, key, "missing");
      auto msgs = ParseMessages(j[key], at, key);
      if (msgs.size() != 1 || msgs[0].role != "assistant")
        Fail(at, key, "must hold exactly one assistant message");
      return msgs[0].content;
    };
    out.chosen = completion("preferred_output");
    out.rejected = completion("non_preferred_output");
  } else if (j.contains("chosen") || j.contains("rejected")) {
    CheckOnly(j, {"prompt", "chosen", "rejected", "metadata"}, at);
    out.prompt = RequireString(j, "prompt", at, "prompt");
    out.chosen = RequireString(j, "chosen", at, "chosen");
    out.rejected = RequireString(j, "rejected", at, "rejected");
  } else {
    Fail(at, "",
         "expected preference data: \"input\"+\"preferred_output\"+"
         "\"non_preferred_output\" or \"prompt\"+\"chosen\"+\"rejected\"");
  }
  return out;
}

}  // namespace

Dataset LoadSupervised(const std::filesystem::path& path, const Tokenizer& tok, const DataOptions& opt) {
  return LoadSupervisedBytes(ReadDataFile(path), path.string(), tok, opt);
}

Dataset LoadSupervisedBytes(const std::string& data, const std::string& name, const Tokenizer& tok,
                            const DataOptions& opt) {
  Dataset ds;
  std::optional<ChatTemplate> tmpl;
  std::string format;
  ds.sha256 = ForEachLineOf(data, name, [&](const Json& j, const LineContext& at) {
    Example ex;
    ex.line = at.line;
    if (IsPreferenceLine(j)) {
      Fail(at, "", "this is preference (DPO) data; set \"loss\": \"dpo\" to train on it");
    }
    SupervisedLine line = ParseSupervisedLine(j, at);
    const std::string& kind = line.kind;
    if (kind == "messages") {
      if (!tmpl) tmpl = ResolveChatTemplate(opt.chat_template, tok, opt.template_kwargs);
      RenderedChat r = RenderAt(at, [&] { return RenderChat(line.messages, *tmpl, tok, false); });
      ex.ids = std::move(r.ids);
      ex.weights = std::move(r.weights);
      if (line.messages.back().role == "assistant") {
        ex.prompt_ids.assign(ex.ids.begin(), ex.ids.begin() + static_cast<long>(r.prompt_len));
        ex.completion_ids = std::move(r.completion_ids);
      }
    } else if (kind == "prompt_completion") {
      ex.ids = WithBos(tok, tok.Encode(line.prompt));
      ex.weights.assign(ex.ids.size(), 0.0f);
      ex.prompt_ids = ex.ids;
      ex.completion_ids = tok.Encode(line.completion);
      ex.completion_ids.push_back(EosId(tok, at));
      ex.ids.insert(ex.ids.end(), ex.completion_ids.begin(), ex.completion_ids.end());
      ex.weights.resize(ex.ids.size(), 1.0f);
    } else {
      ex.ids = WithBos(tok, tok.Encode(line.text));
      if (tok.eos_id) ex.ids.push_back(*tok.eos_id);
      ex.weights.assign(ex.ids.size(), 1.0f);
      if (tok.bos_id) ex.weights[0] = 0.0f;
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
                name + ": no example has a loss token left after truncation to " +
                    std::to_string(opt.max_seq_len) + " tokens",
                name);
  }
  return ds;
}

Dataset LoadPreferences(const std::filesystem::path& path, const Tokenizer& tok, const DataOptions& opt) {
  return LoadPreferencesBytes(ReadDataFile(path), path.string(), tok, opt);
}

Dataset LoadPreferencesBytes(const std::string& data, const std::string& name, const Tokenizer& tok,
                             const DataOptions& opt) {
  Dataset ds;
  std::optional<ChatTemplate> tmpl;
  ds.sha256 = ForEachLineOf(data, name, [&](const Json& j, const LineContext& at) {
    PreferenceExample ex;
    ex.line = at.line;
    PreferenceLine line = ParsePreferenceLine(j, at);
    if (line.chat) {
      if (!tmpl) tmpl = ResolveChatTemplate(opt.chat_template, tok, opt.template_kwargs);
      ex.prompt_ids = RenderAt(at, [&] { return RenderChat(line.prompt_messages, *tmpl, tok, true); }).ids;
      ex.chosen_ids = tok.Encode(line.chosen);
      ex.rejected_ids = tok.Encode(line.rejected);
      ex.chosen_ids.push_back(EndOfTurnId(*tmpl, tok));
      ex.rejected_ids.push_back(EndOfTurnId(*tmpl, tok));
    } else {
      ex.prompt_ids = WithBos(tok, tok.Encode(line.prompt));
      ex.chosen_ids = tok.Encode(line.chosen);
      ex.rejected_ids = tok.Encode(line.rejected);
      ex.chosen_ids.push_back(EosId(tok, at));
      ex.rejected_ids.push_back(EosId(tok, at));
    }
    size_t longest = ex.prompt_ids.size() + std::max(ex.chosen_ids.size(), ex.rejected_ids.size());
    if (static_cast<int64_t>(longest) > opt.max_seq_len) {
      if (!opt.truncate) {
        Fail(at, "",
             std::to_string(longest) + " tokens exceed max_seq_len " + std::to_string(opt.max_seq_len));
      }
      size_t room =
          static_cast<size_t>(opt.max_seq_len) - std::min<size_t>(ex.prompt_ids.size(), opt.max_seq_len);
      if (room == 0) {
        ++ds.stats.skipped;
        return;
      }
      if (ex.chosen_ids.size() > room) ex.chosen_ids.resize(room);
      if (ex.rejected_ids.size() > room) ex.rejected_ids.resize(room);
      ++ds.stats.truncated;
    }
    ds.stats.tokens +=
        static_cast<int64_t>(2 * ex.prompt_ids.size() + ex.chosen_ids.size() + ex.rejected_ids.size());
    ds.stats.loss_tokens += static_cast<int64_t>(ex.chosen_ids.size() + ex.rejected_ids.size());
    ds.stats.max_len = std::max<int64_t>(ds.stats.max_len, static_cast<int64_t>(longest));
    ds.pairs.push_back(std::move(ex));
  });
  ds.stats.examples = static_cast<int64_t>(ds.pairs.size());
  ds.stats.format = "preference";
  if (ds.pairs.empty()) throw Error(Code::kInvalidArgument, name + ": no usable pairs", name);
  return ds;
}

DataFileCheck CheckDataBytes(std::string_view data, const std::string& name) {
  DataFileCheck out;
  bool preference = false;
  int first_line = 0;
  out.sha256 = ForEachLineOf(data, name, [&](const Json& j, const LineContext& at) {
    const bool pref = IsPreferenceLine(j);
    if (first_line == 0) {
      first_line = at.line;
      preference = pref;
    } else if (pref != preference) {
      Fail(at, "",
           std::string("mixes ") + (pref ? "preference" : "supervised") + " data into a file whose line " +
               std::to_string(first_line) + " is " + (preference ? "preference" : "supervised") + " data");
    }
    std::string kind = pref ? (ParsePreferenceLine(j, at).chat ? "preference_chat" : "preference")
                            : ParseSupervisedLine(j, at).kind;
    if (out.format.empty()) out.format = kind;
    if (out.format != kind) out.format = pref ? "preference" : "mixed";
    ++out.examples;
  });
  out.preference = preference;
  return out;
}

DataFileCheck CheckDataFile(const std::filesystem::path& path) {
  return CheckDataBytes(ReadDataFile(path), path.string());
}

}  // namespace burst
