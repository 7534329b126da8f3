// A training loop's request data (tinker's Datum lists and loss settings,
// train/loop_data.h), as the control plane checks every forward_backward
// body: {"loss_fn", "data", "loss_fn_config"} parsed with the limits of a
// small model. Whatever parses is within the limits it was given.
#include <string>

#include "core/json.h"
#include "fuzz_util.h"
#include "train/loop_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace burst;
  const LoopDataLimits limits{512, 64, 1024};
  try {
    const Json body = ParseJson(fuzz::Text(data, size), "body");
    if (!body.is_object()) return 0;
    const std::string loss =
        body.value("loss_fn", Json()).is_string() ? body["loss_fn"].get<std::string>() : "cross_entropy";
    const std::vector<LoopDatum> datums = ParseLoopData(body.value("data", Json()), loss, limits, "data");
    int64_t total = 0;
    for (const LoopDatum& d : datums) {
      fuzz::Expect(!d.tokens.empty() && static_cast<int64_t>(d.tokens.size()) <= limits.max_seq_len,
                   "datum length");
      fuzz::Expect(d.targets.size() == d.tokens.size(), "targets as long as tokens");
      for (int64_t t : d.tokens) fuzz::Expect(t >= 0 && t < limits.vocab_size, "token in the vocabulary");
      for (int64_t t : d.targets) fuzz::Expect(t >= 0 && t < limits.vocab_size, "target in the vocabulary");
      for (const auto& [name, v] : d.inputs) fuzz::Expect(v.size() == d.tokens.size(), "an input per token");
      total += static_cast<int64_t>(d.tokens.size());
    }
    fuzz::Expect(total <= limits.max_tokens, "request total within its limit");
    ParseLossConfig(loss, body.value("loss_fn_config", Json()), "loss_fn_config");
  } catch (const Error&) {
  }
  return 0;
}
