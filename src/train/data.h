// Training data: JSONL files in the formats people already have, turned
// into token ids with a loss weight per token.
//
// Accepted lines (docs/recipe.md, "Data formats"): OpenAI chat {"messages": [...]},
// {"prompt", "completion"}, {"text"}; preference pairs as OpenAI's DPO
// format or {"prompt", "chosen", "rejected"}. Every error names file:line and
// the field; a file with any bad line is rejected whole (nothing trains on
// half a file).
//
// Thread-safety: stateless functions. Errors: throw burst::Error.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer.h"
#include "train/chat_template.h"

namespace burst {

struct DataOptions {
  int64_t max_seq_len = 512;
  bool truncate = true;
  std::string chat_template = "auto";
  Json template_kwargs = Json::object();  // Recipe::template_kwargs
};

struct Example {
  std::vector<int> ids;
  std::vector<float> weights;  // weights[t]: loss weight of predicting ids[t]
  int line = 0;
  // For exact match / label accuracy: the prompt a sampler continues from and
  // the expected completion (content + end token); empty when not applicable.
  std::vector<int> prompt_ids;
  std::vector<int> completion_ids;
};

struct PreferenceExample {
  std::vector<int> prompt_ids;
  std::vector<int> chosen_ids;  // completion tokens, ending with the end token
  std::vector<int> rejected_ids;
  int line = 0;
};

struct DataStats {
  int64_t examples = 0;
  int64_t tokens = 0;       // all tokens
  int64_t loss_tokens = 0;  // tokens with weight > 0
  int64_t truncated = 0;
  int64_t skipped = 0;  // no loss tokens left after truncation
  int64_t max_len = 0;
  std::string format;  // messages | prompt_completion | text | preference | mixed
};

struct Dataset {
  std::vector<Example> examples;
  std::vector<PreferenceExample> pairs;
  DataStats stats;
  std::string sha256;  // of the file's bytes
};

// A file's format checked line by line without a tokenizer (what an upload
// is checked against): every field of every line, and that supervised and
// preference lines are not mixed. Throws on the first bad line, naming
// `name:line` and the field.
struct DataFileCheck {
  int64_t examples = 0;
  std::string format;  // messages | prompt_completion | text | mixed | preference | preference_chat
  bool preference = false;
  std::string sha256;
};
DataFileCheck CheckDataBytes(std::string_view data, const std::string& name);
DataFileCheck CheckDataFile(const std::filesystem::path& path);

// Loads supervised data (messages, prompt/completion, text).
Dataset LoadSupervised(const std::filesystem::path& path, const Tokenizer& tokenizer,
                       const DataOptions& options);
// Loads preference data (OpenAI DPO or prompt/chosen/rejected).
Dataset LoadPreferences(const std::filesystem::path& path, const Tokenizer& tokenizer,
                        const DataOptions& options);
// The same two from a file's bytes; `name` stands for the file in errors.
Dataset LoadSupervisedBytes(const std::string& data, const std::string& name, const Tokenizer& tokenizer,
                            const DataOptions& options);
Dataset LoadPreferencesBytes(const std::string& data, const std::string& name, const Tokenizer& tokenizer,
                             const DataOptions& options);

}  // namespace burst
