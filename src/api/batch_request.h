// OpenAI's Batch API (docs/api.md, "Batches"): the input file's check at
// upload, a batch's create request, and the Batch object.
//
// A batch is a job of kind "batch" (runtime: queued, leased, retried and
// recovered as evaluations are); its worker decodes its lines together
// (worker/batch_run.h). At create, every line is parsed as its endpoint's
// request (api/sample_request.h) and written to the store, its seed fixed:
// a line with a bad body is answered in the error file, the others run. A
// file that is not a batch input, lines for another endpoint or model,
// and custom_ids used twice refuse the create (400, naming the line): a
// failed request creates nothing.
//
// Thread-safety: stateless. Errors: throw burst::Error naming the field
// (or "FILE:LINE").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api/job_request.h"
#include "core/json.h"
#include "db/metadata.h"

namespace burst {

// At most this many lines in a batch's input file (OpenAI's limit).
constexpr int64_t kMaxBatchLines = 50000;

struct BatchFileCheck {
  std::string sha256;
  int64_t lines = 0;
};

// An upload with purpose "batch": each line {custom_id, method: "POST",
// url: "/v1/chat/completions" | "/v1/completions", body: {...}}, the
// custom_ids distinct. The bodies are checked at create.
BatchFileCheck CheckBatchBytes(std::string_view content, const std::string& filename);

// POST /v1/batches {input_file_id, endpoint, completion_window: "24h",
// metadata?, output_expires_after?}: the job's spec (kind "batch") and the
// requests to write at spec.batch.requests_key once the route has named
// the job. Reads the input file from ctx.store.
struct ParsedBatch {
  ParsedJob job;
  std::string requests;  // JSONL: {custom_id, chat, request} or {custom_id, error}
};
ParsedBatch ParseBatchRequest(const Json& body, const JobRequestContext& ctx);

// The Batch object, with Burst's own fields (scope, the usage ledger's
// lines) under "burst".
Json BatchJson(const JobRecord& job, const UsageSum& usage);

}  // namespace burst
