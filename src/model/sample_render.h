// A worker's samples as OpenAI's response objects (docs/api.md, "Sampling"):
// whole completions and chat completions, their streamed chunks, and the
// last usage chunk; logprobs in each endpoint's shape (chat's `content`
// list with `bytes` and `top_logprobs`; the legacy completions' parallel
// `tokens`, `token_logprobs`, `top_logprobs` and `text_offset` lists, with
// the prompt first under `echo`).
//
// `request` is ParseSampleRequest's output; `result` the worker's
// SampleResultJson. Thread-safety: stateless.
#pragma once

#include <string>

#include "core/json.h"

namespace burst {

// One server-sent event of a streamed response, from a worker's piece
// ({index, delta, token, logprob, top?, finish_reason}); null when there is
// nothing to send (an empty delta without logprobs asked for). `first`
// marks the first piece of a choice (the chat role goes out with it).
Json RenderStreamChunk(const std::string& id, const std::string& model, const Json& request,
                       const Json& piece, int64_t created, bool chat, bool first);
// The last event of a stream whose request asked for stream_options
// {"include_usage": true}: no choices, the call's usage (as OpenAI sends it).
Json RenderStreamUsage(const std::string& id, const std::string& model, const Json& result, int64_t created,
                       bool chat);

// The response objects; `extra` (Burst's own fields) is added as "burst".
Json RenderCompletion(const std::string& id, const std::string& model, const Json& request,
                      const Json& result, int64_t created, const Json& extra);
Json RenderChatCompletion(const std::string& id, const std::string& model, const Json& request,
                          const Json& result, int64_t created, const Json& extra);

}  // namespace burst
