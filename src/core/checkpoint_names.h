// The names of a fine-tuning job's checkpoints, as sampling, GET /v1/models
// and the jobs API give and take them:
//
//   ftjob-ID:step-N          a job's checkpoint at step N (fine_tuned_model)
//   ftjob-ID:SUFFIX:step-N   the same, for a job created with a `suffix`
//                            (the name carries it, as OpenAI's do)
//   ftckpt-ID-N              the checkpoint's id
//
// ID is lowercase letters and digits; N a positive step with no sign,
// leading zero or anything after it; SUFFIX letters, digits, '.', '_' and
// '-' (ValidSuffix). Reading is strict: anything else is not a name.
//
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"

namespace burst {

struct CheckpointName {
  std::string job_id;  // "ftjob-ID"
  int64_t step = 0;
  std::string suffix;  // as the name gave it ("" = none); the caller checks it is the job's
};
std::optional<CheckpointName> ParseCheckpointName(std::string_view name);

// "ftjob-ID[:SUFFIX]:step-N" (a suffix that is not ValidSuffix is left out)
// and "ftckpt-ID-N".
std::string CheckpointModelName(const std::string& job_id, int64_t step, const std::string& suffix = "");
std::string CheckpointId(const std::string& job_id, int64_t step);

// A job's `suffix` as a model name can carry it: 1..64 letters, digits,
// '.', '_' or '-'.
bool ValidSuffix(std::string_view suffix);
// A job spec's suffix ("" for none).
std::string SuffixOf(const Json& spec);
// Whether `name` names a checkpoint of the job with `spec`: no suffix, or
// the job's own (another suffix names nothing).
bool SuffixMatches(const CheckpointName& name, const Json& spec);

}  // namespace burst
