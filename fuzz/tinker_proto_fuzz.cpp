// forward_backward bodies in protobuf (api/tinker_proto.h), as the control
// plane reads what SDK 0.25.0 posts: decoded with a bound on the numbers it
// may hold, then checked as the route checks them.
#include <string>

#include "api/tinker_proto.h"
#include "fuzz_util.h"
#include "train/loop_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace burst;
  constexpr int64_t kMaxValues = 4096;
  try {
    ProtoFwdBwd r = DecodeFwdBwdRequest(fuzz::Text(data, size), kMaxValues);
    int64_t values = 0;
    for (const Json& d : r.data) {
      for (const Json& c : d["model_input"]["chunks"]) values += static_cast<int64_t>(c["tokens"].size());
      for (const auto& [name, t] : d["loss_fn_inputs"].items())
        values += static_cast<int64_t>(t["data"].size());
    }
    fuzz::Expect(values <= kMaxValues, "decoded more numbers than the bound");
    ParseLoopData(r.data, r.loss_fn.empty() ? "cross_entropy" : r.loss_fn, {1000, 64, 1024}, "data");
    ParseLossConfig(r.loss_fn.empty() ? "cross_entropy" : r.loss_fn, r.loss_fn_config, "loss_fn_config");
  } catch (const Error&) {
  }
  return 0;
}
