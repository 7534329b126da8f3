// Sweeps: one fine-tuning job body fanned out over a grid of values or a
// list of runs (docs/api.md, "Sweeps"). Each point becomes an ordinary job;
// this file turns a POST /v1/sweeps body into the points' job bodies, names
// the sweep field an error came from, and renders the sweep's table.
//
// A field is an OpenAI name or a dotted recipe path (docs/recipe.md):
//   n_epochs, batch_size, learning_rate_multiplier, beta
//       -> method.<type>.hyperparameters (or the top-level `hyperparameters`
//          when the job body uses that),
//   model, training_file, validation_file, seed, suffix, max_retries, timeout_s
//       -> the job body's top level,
//   anything else (lora.rank, learning_rate, schedule.kind, ...; a leading
//   "recipe." is allowed) -> body.recipe, nested objects created as needed.
// A grid expands to its cartesian product in a stable order: fields sorted by
// name, the first varying slowest, values in the order given.
//
// Thread-safety: stateless. Errors: throw burst::Error (kInvalidArgument)
// naming the field ("grid.lora.rank", "runs[2]", "job.method").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "db/metadata.h"

namespace burst {

inline constexpr size_t kMaxSweepPoints = 256;

struct SweepPoint {
  Json overrides = Json::object();           // canonical field -> value
  std::map<std::string, std::string> where;  // canonical field -> its value's path in the request
};

// The points of a {"job", "grid"} or {"job", "runs"} body, checked for shape
// (the values themselves are checked by ParseJobRequest on each point).
std::vector<SweepPoint> ExpandSweep(const Json& body);

// `job` with the point's values put in place.
Json PointJobBody(const Json& job, const SweepPoint& point);

// An error of ParseJobRequest on point `index`, renamed to the request field
// at fault: the value's path ("grid.lora.rank[2]", "runs[2].lora.rank") when
// the error is about an overridden field, else "job.<param>". Other codes
// than kInvalidArgument/kNotFound come back unchanged.
Status SweepPointError(const Status& s, const SweepPoint& point, size_t index);

// "lora.rank=8 learning_rate_multiplier=0.5" (strings without quotes).
std::string OverridesText(const Json& overrides);

// One run as the table shows it: its job (nullopt while not created).
struct SweepRunView {
  std::string job_id;
  Json overrides = Json::object();
  std::optional<JobRecord> job;
  std::vector<AttemptRecord> attempts;
  UsageSum usage;
};

// The runs of a sweep with their jobs, attempts and usage.
std::vector<SweepRunView> LoadSweepRuns(Metadata& md, const SweepRecord& sweep);

// Throws kInvalidArgument (param "metric") unless `metric` is "" or a metric
// runs can be ranked by: train_loss, eval_loss, eval_token_acc,
// eval_exact_match, eval_label_acc, wall_s, cost.
void CheckSweepMetric(const std::string& metric);
bool MetricHigherIsBetter(const std::string& metric);

// running while any run is not over; then succeeded (all succeeded),
// cancelled (the sweep was cancelled), failed (any failed), else cancelled.
// A sweep's status is named like a job's.
JobStatus SweepStatus(const SweepRecord& sweep, const std::vector<SweepRunView>& runs);

// The sweep object; `metric` "" = eval_loss when every run has a validation
// file, else train_loss. now_ms (unix ms) times runs still going.
Json SweepJson(const SweepRecord& sweep, const std::vector<SweepRunView>& runs, const std::string& metric,
               int64_t now_ms);

}  // namespace burst
