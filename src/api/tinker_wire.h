// The tinker SDK's request and result shapes (docs/tinker-protocol.md, for
// the pinned release): strict readers for the bodies it sends, and the
// results as it parses them, JSON or protobuf (tinker_proto.h).
//
// Thread-safety: stateless functions. Errors: throw burst::Error
// (kInvalidArgument) naming the field.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "api/http/message.h"
#include "api/models.h"
#include "core/json.h"

namespace burst {

// What /api/v1/client/config answers.
Json ClientConfigJson();

// A base model the client names, resolved under the roots (kNotFound
// naming "base_model" with the names there are).
std::string ResolveBaseModel(const std::string& name, const std::vector<std::filesystem::path>& roots);
// config.json's vocab_size of a model folder.
int64_t VocabSize(const std::string& dir);

// lora_config {rank, seed, train_attn, train_mlp, train_unembed}, the rank
// checked against the catalog's; a missing seed becomes `default_seed`
// (recorded, so a restored run makes the same adapter, and the same for a
// retried create_model).
Json ParseLoraConfig(const Json& lora, const ModelInfo& m, int64_t default_seed);
// adam_params with Tinker's defaults filled in.
Json ParseAdamParams(const Json& adam);
// create_model's optimizer_config (SDK 0.29 and later): absent, null or
// {"type": "adamw"} (what Burst trains with); another family (the SDK's
// "dimuon") is a 400 naming optimizer_config.type.
void CheckOptimizerConfig(const Json& config);
// optim_step's optimizer_params (the SDK's per-step parameters of a family
// other than Adam): a 400 naming it, as create_model refused that family.
void RefuseOptimizerParams(const Json& params);
// A checkpoint name usable in the store: [A-Za-z0-9._=-], 1-128 chars.
std::string CheckCheckpointName(const std::string& name, const std::string& param);

// tinker://RUN/KIND/NAME (KIND weights or sampler_weights).
// A training run's id as Burst names it (SESSION-train-N) from a request's
// model_id or a tinker:// path: the SDK derives "SESSION:train:N" itself
// when it makes a run by loading a checkpoint (create_training_client_from_state).
std::string CanonicalRunId(const std::string& model_id);

struct TinkerPath {
  std::string run, kind, name;
};
TinkerPath ParseTinkerPath(const std::string& path, const std::string& param);

// A forward_backward or forward request, from its JSON body (the
// forward_backward_input / forward_input form) or its protobuf body.
struct FwdBwdRequest {
  std::string model_id;
  int64_t seq_id = 0;
  std::string loss_fn;
  Json loss_fn_config;  // null or an object of numbers
  Json data;            // the datums as JSON (train/loop_data.h's form)
  bool forward_only = false;
  std::string data_path, config_path;  // what errors name
};
// At most this many numbers (tokens and tensor values) in one request,
// whichever the encoding: 4 M, about 32 MB of protobuf.
constexpr int64_t kMaxRequestValues = 4 << 20;
// The longest TTL a checkpoint takes (ttl_seconds), 100 years.
constexpr int64_t kMaxCheckpointTtlS = 100LL * 365 * 86400;
FwdBwdRequest ParseFwdBwdRequest(const http::Request& req, bool forward_route);

// An asample body: the op the worker gets (num_samples, sampling params,
// prompt_logprobs, topk_prompt_logprobs, seed) and what it samples from.
struct SampleOp {
  Json op;
  Json prompt;  // the ModelInput
  int64_t max_tokens = 0;
  std::string sampling_session_id, model_path, base_model;
};
SampleOp ParseSampleOp(const Json& body);

// A failed future's answer: {"error", "category": "user" | "server"}.
Json FailedFutureJson(const Status& s);
// A finished future's answer: forward_backward / forward / sample results
// rendered for the SDK (protobuf when `proto`), the others as the worker
// gave them.
// `burst` (timing) is added to JSON answers as "burst".
void SendFutureResult(http::Response& res, const std::string& type, const Json& result, bool proto,
                      const Json& burst = Json());

}  // namespace burst
