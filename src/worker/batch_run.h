// A batch's attempt on a worker (OpenAI's Batch API; api/batch_request.h
// checks and writes the requests): every line of the batch's requests
// decoded together on one BatchDecoder, answered in parts, then the output
// and error files assembled.
//
// Durability: the lines go in parts of `chunk_lines` (part k holds lines
// [k*C, (k+1)*C)), each written to the store whole once all its lines are
// answered (store/keys.h BatchPartKey). An attempt after a lost one lists
// the parts written and decodes only the others, so no line is answered
// twice and none is lost; a part is one object, so it is there whole or
// not at all. A line's seed was fixed when the batch was created: a line
// decoded again draws the same tokens (up to the batch's rounding,
// model/batch_decoder.h).
//
// Output lines are OpenAI's: {"id", "custom_id", "response": {"status_code",
// "request_id", "body"}, "error": null}; status 200 lines go to the output
// file, the others (a line the control plane found bad, a prompt over the
// model's context) to the error file, each with its OpenAI error body.
//
// Errors: throws burst::Error (the store's, the model's); Code::kCancelled
// when `should_stop` said so (the parts written stay).
#pragma once

#include <functional>
#include <string>

#include "core/json.h"
#include "store/object_store.h"
#include "worker/samplers.h"

namespace burst {

struct BatchHooks {
  std::function<bool()> should_stop;
  std::function<void(const std::string&)> log;
  // After each part and when assembling: {step: lines answered,
  // total_steps: lines, request_counts: {total, completed, failed},
  // finalizing?: true}.
  std::function<void(const Json&)> progress;
};

// The attempt's result: {output: {key, bytes, sha256, lines}, errors:
// {...}, request_counts: {total, completed, failed}, usage: {input_tokens,
// output_tokens, total_tokens}}. `task` is the lease's (runtime TaskJson:
// store_prefix, attempt, model..., batch: {requests_key, chunk_lines,
// lines, model}).
Json RunBatch(const Json& task, ObjectStore& store, Samplers& samplers, const BatchHooks& hooks);

}  // namespace burst
