#include "train/loop_data.h"

#include <cmath>
#include <set>

#include "core/status.h"

namespace burst {

const std::vector<std::string> kLoopLossNames = {"cross_entropy", "importance_sampling", "ppo", "cispo",
                                                 "dro"};

bool LoopOpChangesState(const std::string& type) {
  return type == "forward_backward" || type == "optim_step" || type == "load_weights";
}

namespace {

[[noreturn]] void Bad(const std::string& path, const std::string& what) {
  throw Error(Code::kInvalidArgument, path + ": " + what, path);
}

std::string LossList() {
  std::string out;
  for (const auto& n : kLoopLossNames) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void CheckLoss(const std::string& loss_fn, const std::string& path) {
  for (const auto& n : kLoopLossNames)
    if (n == loss_fn) return;
  Bad(path, "unknown loss_fn \"" + loss_fn + "\" (" + LossList() + ")");
}

// The flat values of a TensorData, checked to be one row of `want` values
// (want < 0: any length). `integer`: int64 (else float32).
template <typename T>
std::vector<T> Row(const Json& td, const std::string& path, bool integer, int64_t want) {
  if (!td.is_object()) Bad(path, "must be a TensorData object {data, dtype, shape}");
  FieldReader f(td, path);
  const std::string dtype = f.String("dtype", "");
  if (dtype != "int64" && dtype != "float32") Bad(path + ".dtype", "must be \"int64\" or \"float32\"");
  const Json data = f.Raw("data"), shape = f.Raw("shape");
  for (const char* k : {"sparse_crow_indices", "sparse_col_indices"}) {
    if (!f.Raw(k).is_null()) Bad(path + "." + k, "sparse tensors are not supported: send the dense row");
  }
  f.RejectUnknown();
  if (!data.is_array()) Bad(path + ".data", "must be a list of numbers");
  const int64_t n = static_cast<int64_t>(data.size());
  if (!shape.is_null()) {
    if (!shape.is_array() || shape.size() != 1 || !shape[0].is_number_integer() ||
        shape[0].get<int64_t>() != n) {
      Bad(path + ".shape",
          "must be [" + std::to_string(n) + "] (one value per token; " + JsonPreview(shape) + " given)");
    }
  }
  if (want >= 0 && n != want) {
    Bad(path,
        "has " + std::to_string(n) + " values; the model input has " + std::to_string(want) + " tokens");
  }
  std::vector<T> out;
  out.reserve(data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    const Json& v = data[i];
    const std::string at = path + ".data[" + std::to_string(i) + "]";
    if (integer) {
      if (!v.is_number_integer()) Bad(at, "must be an integer");
      out.push_back(static_cast<T>(v.get<int64_t>()));
    } else {
      if (!v.is_number()) Bad(at, "must be a number");
      const double x = v.get<double>();
      if (!std::isfinite(x) || std::fabs(x) > 3.4e38) Bad(at, "must be a finite float32");
      out.push_back(static_cast<T>(x));
    }
  }
  if (integer && dtype != "int64") Bad(path + ".dtype", "must be \"int64\" (token ids)");
  return out;
}

void CheckToken(int64_t id, const LoopDataLimits& limits, const std::string& at) {
  if (id < 0 || (limits.vocab_size > 0 && id >= limits.vocab_size)) {
    Bad(at, "token id " + std::to_string(id) + " is outside the model's vocabulary [0, " +
                std::to_string(limits.vocab_size) + ")");
  }
}

}  // namespace

std::vector<int64_t> ParseModelInput(const Json& model_input, const LoopDataLimits& limits,
                                     const std::string& path) {
  if (!model_input.is_object()) Bad(path, "must be a ModelInput object {chunks: [...]}");
  FieldReader f(model_input, path);
  const Json chunks = f.Raw("chunks");
  f.RejectUnknown();
  if (!chunks.is_array()) Bad(path + ".chunks", "must be a list of chunks");
  std::vector<int64_t> tokens;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const std::string at = path + ".chunks[" + std::to_string(c) + "]";
    if (!chunks[c].is_object()) Bad(at, "must be a chunk object");
    FieldReader cr(chunks[c], at);
    const std::string type = cr.String("type", "encoded_text");
    if (type != "encoded_text") {
      Bad(at + ".type", "\"" + type + "\" chunks are not supported (text models only: \"encoded_text\")");
    }
    const Json toks = cr.Raw("tokens");
    cr.RejectUnknown();
    if (!toks.is_array()) Bad(at + ".tokens", "must be a list of token ids");
    for (size_t i = 0; i < toks.size(); ++i) {
      const std::string ti = at + ".tokens[" + std::to_string(i) + "]";
      if (!toks[i].is_number_integer()) Bad(ti, "must be an integer token id");
      CheckToken(toks[i].get<int64_t>(), limits, ti);
      tokens.push_back(toks[i].get<int64_t>());
    }
  }
  if (limits.max_seq_len > 0 && static_cast<int64_t>(tokens.size()) > limits.max_seq_len) {
    Bad(path, "has " + std::to_string(tokens.size()) + " tokens, more than the model's max_seq_len of " +
                  std::to_string(limits.max_seq_len));
  }
  return tokens;
}

std::vector<LoopDatum> ParseLoopData(const Json& data, const std::string& loss_fn,
                                     const LoopDataLimits& limits, const std::string& path) {
  CheckLoss(loss_fn, path);
  if (!data.is_array()) Bad(path, "must be a list of datums");
  if (data.empty()) Bad(path, "must hold at least one datum");
  const bool rl = loss_fn != "cross_entropy";
  std::set<std::string> allowed = {"target_tokens"};
  if (rl) {
    allowed.insert({"logprobs", "advantages"});
    if (loss_fn == "ppo" || loss_fn == "cispo") allowed.insert({"clip_low_threshold", "clip_high_threshold"});
  } else {
    allowed.insert("weights");
  }
  std::vector<LoopDatum> out;
  out.reserve(data.size());
  int64_t total = 0;
  for (size_t d = 0; d < data.size(); ++d) {
    const std::string at = path + "[" + std::to_string(d) + "]";
    if (!data[d].is_object()) Bad(at, "must be a Datum object {model_input, loss_fn_inputs}");
    FieldReader f(data[d], at);
    LoopDatum datum;
    datum.tokens = ParseModelInput(f.Raw("model_input"), limits, at + ".model_input");
    const Json inputs = f.Raw("loss_fn_inputs");
    f.RejectUnknown();
    const int64_t n = static_cast<int64_t>(datum.tokens.size());
    if (n == 0) Bad(at + ".model_input", "has no tokens");
    total += n;
    if (limits.max_tokens > 0 && total > limits.max_tokens) {
      Bad(path,
          "holds more than " + std::to_string(limits.max_tokens) + " tokens in all (the per-request limit)");
    }
    const std::string ip = at + ".loss_fn_inputs";
    if (!inputs.is_object()) Bad(ip, "must be an object of TensorData by name");
    for (const auto& [name, td] : inputs.items()) {
      if (!allowed.count(name)) {
        std::string names;
        for (const auto& a : allowed) names += (names.empty() ? "" : ", ") + a;
        Bad(ip + "." + name, "is not an input of loss_fn " + loss_fn + " (its inputs: " + names + ")");
      }
      if (name == "target_tokens") {
        datum.targets = Row<int64_t>(td, ip + "." + name, true, n);
        for (size_t i = 0; i < datum.targets.size(); ++i)
          CheckToken(datum.targets[i], limits, ip + ".target_tokens.data[" + std::to_string(i) + "]");
      } else {
        datum.inputs[name] = Row<float>(td, ip + "." + name, false, n);
      }
    }
    if (datum.targets.empty()) Bad(ip + ".target_tokens", "is required");
    if (rl) {
      for (const char* need : {"logprobs", "advantages"}) {
        if (!datum.inputs.count(need)) Bad(ip + "." + need, std::string("is required by loss_fn ") + loss_fn);
      }
    } else if (!datum.inputs.count("weights")) {
      datum.inputs["weights"] = std::vector<float>(static_cast<size_t>(n), 1.0f);
    }
    out.push_back(std::move(datum));
  }
  return out;
}

std::map<std::string, double> ParseLossConfig(const std::string& loss_fn, const Json& config,
                                              const std::string& path) {
  CheckLoss(loss_fn, path);
  std::map<std::string, double> out;
  if (loss_fn == "ppo" || loss_fn == "cispo") {
    out = {{"clip_low_threshold", 0.8}, {"clip_high_threshold", 1.2}};
  } else if (loss_fn == "dro") {
    out = {{"beta", 0.05}};
  }
  if (config.is_null()) return out;
  if (!config.is_object()) Bad(path, "must be an object of numbers");
  for (const auto& [k, v] : config.items()) {
    if (!out.count(k)) {
      std::string names;
      for (const auto& [n, d] : out) names += (names.empty() ? "" : ", ") + n;
      Bad(path + "." + k, "is not a setting of loss_fn " + loss_fn +
                              (names.empty() ? " (it takes none)" : " (its settings: " + names + ")"));
    }
    if (!v.is_number() || !std::isfinite(v.get<double>())) Bad(path + "." + k, "must be a finite number");
    out[k] = v.get<double>();
  }
  if (out.count("clip_low_threshold") &&
      !(out["clip_low_threshold"] > 0 && out["clip_low_threshold"] <= 1 && out["clip_high_threshold"] >= 1)) {
    Bad(path, "needs 0 < clip_low_threshold <= 1 <= clip_high_threshold");
  }
  if (out.count("beta") && !(out["beta"] >= 0)) Bad(path + ".beta", "must be >= 0");
  return out;
}

Json TensorDataJson(const std::vector<float>& values) {
  return {{"data", values}, {"dtype", "float32"}, {"shape", {values.size()}}};
}

Json TensorDataJson(const std::vector<int64_t>& values) {
  return {{"data", values}, {"dtype", "int64"}, {"shape", {values.size()}}};
}

}  // namespace burst
