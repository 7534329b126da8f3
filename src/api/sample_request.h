// Sampling requests (POST /v1/completions and /v1/chat/completions, OpenAI's
// shapes; docs/api.md, "Sampling").
//
// ParseSampleRequest checks the body field by field (errors name the field;
// OpenAI fields Burst does not implement are 400 unless they hold their
// no-op value) and returns what a worker needs. ResolveSampleModel finds what
// `model` names for the caller's organisation: a checkpoint (`JOB:step-N` or
// its id `ftckpt-...`), always exactly that checkpoint, or a base model.
// RenderCompletion / RenderChatCompletion turn a worker's samples into the
// response objects.
//
// Thread-safety: stateless. Errors: throw burst::Error.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "core/json.h"
#include "db/metadata.h"

namespace burst {

class ObjectStore;

// `chat`: /v1/chat/completions (messages) rather than /v1/completions (prompt).
Json ParseSampleRequest(const Json& body, bool chat);

struct SampleTarget {
  std::string base_model;         // resolved folder
  std::string checkpoint_prefix;  // the sampler folder in the store ("" = the base model itself)
  bool full = false;              // a full fine-tune's weights, not an adapter
};

// A checkpoint's name, read strictly: "ftjob-ID:step-N" or its id
// "ftckpt-ID-N" (ID lowercase letters and digits, N a positive step number
// with nothing after it); nullopt for anything else.
struct CheckpointName {
  std::string job_id;  // "ftjob-ID"
  int64_t step = 0;
};
std::optional<CheckpointName> ParseCheckpointName(std::string_view name);
// The two names of a job's checkpoint at `step`, as ParseCheckpointName
// reads them: "ftjob-ID:step-N" (what sampling takes, the job's
// fine_tuned_model) and its id "ftckpt-ID-N".
std::string CheckpointModelName(const std::string& job_id, int64_t step);
std::string CheckpointId(const std::string& job_id, int64_t step);

// A training loop's sampler checkpoint (tinker://RUN/sampler_weights/NAME)
// too, read from `store`: its adapter names its base model.
SampleTarget ResolveSampleModel(const std::string& model, const std::string& org_id, Metadata& md,
                                const std::vector<std::filesystem::path>& model_roots,
                                const ObjectStore* store = nullptr);

// One server-sent event of a streamed response, from a worker's piece
// ({index, delta, token, logprob, finish_reason}); null when there is nothing
// to send (an empty delta without logprobs asked for). `first` marks the
// first piece of a choice (the chat role goes out with it).
Json RenderStreamChunk(const std::string& id, const std::string& model, const Json& request, const Json& piece,
                       int64_t created, bool chat, bool first);
// The last event of a stream whose request asked for stream_options
// {"include_usage": true}: no choices, the call's usage (as OpenAI sends it).
Json RenderStreamUsage(const std::string& id, const std::string& model, const Json& result, int64_t created,
                       bool chat);

// The response objects; `extra` (Burst's own fields) is added as "burst".
Json RenderCompletion(const std::string& id, const std::string& model, const Json& request, const Json& result,
                      int64_t created, const Json& extra);
Json RenderChatCompletion(const std::string& id, const std::string& model, const Json& request, const Json& result,
                          int64_t created, const Json& extra);

}  // namespace burst
