// A fine-tuning job's result file, as OpenAI's jobs list one in
// `result_files`: its step metrics as CSV (step, train_loss,
// train_accuracy, valid_loss, valid_mean_token_accuracy), rendered on
// request from the job's metrics.jsonl in the store. Its id is derived from
// the job's ("file-<job's id part>-metrics"), so nothing is written when a
// job ends and GET /v1/files/{id}[/content] reads it like an uploaded file.
//
// Thread-safety: stateless. Errors: none thrown (bad lines are skipped).
#pragma once

#include <optional>
#include <string>

namespace burst {

std::string ResultFileId(const std::string& job_id);
// The job a result file id belongs to ("ftjob-..."), or nullopt for any other id.
std::optional<std::string> ResultFileJob(const std::string& file_id);
// metrics.jsonl's train and eval lines as one CSV row per training step,
// the evaluation of that step beside it (an evaluation at step 0, the
// baseline, has a row of its own); blank where there is no value.
std::string MetricsCsv(const std::string& metrics_jsonl);

}  // namespace burst
