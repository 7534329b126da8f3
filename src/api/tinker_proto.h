// The protobuf messages of the tinker SDK's wire protocol (package
// tinker_public; docs/tinker-protocol.md, section 5), written out by hand:
// decoding a ForwardBackwardRequest body, encoding ForwardBackwardOutput and
// SampleResponse results.
//
// By hand rather than with libprotobuf: three messages, and a reader of
// untrusted bytes that checks every length against what is left and bounds
// how many values it materialises, the way the SentencePiece reader
// (model/sp_model_proto.cpp) does. Unknown fields are skipped, as protobuf
// does; groups, images, dmel chunks and sparse tensors are refused naming
// the field.
//
// Thread-safety: stateless functions. Errors: throw burst::Error
// (kInvalidArgument) naming the field ("data[2].loss_fn_inputs.weights").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/json.h"

namespace burst {

// A ForwardBackwardRequest, its datums in the JSON form train/loop_data.h
// reads ({model_input: {chunks}, loss_fn_inputs: {name: TensorData}}), so
// the same checks apply to both encodings. At most `max_values` numbers
// (tokens and tensor elements) in all.
struct ProtoFwdBwd {
  std::string model_id;
  int64_t seq_id = 0;
  std::string loss_fn;
  Json loss_fn_config = Json::object();
  Json data = Json::array();
  bool forward_only = false;
};
ProtoFwdBwd DecodeFwdBwdRequest(std::string_view bytes, int64_t max_values);

// A forward / forward_backward result ({loss_fn_outputs: [{name: [floats]}],
// metrics: {name: number}}) as one ArrayRecord of float32 BatchedTensors,
// logprobs first, then the other fields by name.
std::string EncodeFwdBwdOutput(const Json& result);
// A sample result ({sequences: [{tokens, logprobs, stop_reason}],
// prompt_logprobs: [null | number]}); null prompt logprobs become NaN.
std::string EncodeSampleResponse(const Json& result);

}  // namespace burst
