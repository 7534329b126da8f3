#include "api/estimate.h"

#include <algorithm>
#include <cmath>

namespace burst {

std::vector<JobRecord> RecentJobs(const std::string& org_id, Metadata& md) {
  auto jobs = md.ListJobs(org_id, "", 500, "train");
  if (!jobs.ok()) throw Error(jobs.status());
  return std::move(jobs).value();
}

std::pair<double, int64_t> MeasuredThroughput(const std::string& base_model, int threads,
                                              const std::vector<JobRecord>& jobs) {
  double tokens = 0, seconds = 0;
  int64_t n = 0;
  for (const JobRecord& j : jobs) {
    if (j.status != JobStatus::kSucceeded || j.trained_tokens <= 0 || j.run_seconds <= 0) continue;
    if (j.spec.value("base_model", "") != base_model) continue;
    if (j.spec.value("recipe", Json::object()).value("threads", 0) != threads) continue;
    tokens += static_cast<double>(j.trained_tokens);
    seconds += j.run_seconds;
    ++n;
  }
  return {n ? tokens / seconds : 0.0, n};
}

Json EstimateJob(const ParsedJob& job, const FileRecord& train, const ModelInfo& model, const std::string& org_id,
                 Metadata& md, const EstimatePrices& prices) {
  const std::vector<JobRecord> jobs = RecentJobs(org_id, md);
  const Json& recipe = job.spec.at("recipe");
  const int64_t batch = recipe.value("batch_size", int64_t{1}) * recipe.value("grad_accum", int64_t{1});
  const int64_t max_seq = recipe.value("max_seq_len", int64_t{512});
  const std::string base = job.spec.value("base_model", "");
  // Sequences the job will feed: steps x effective batch, at most the
  // dataset's examples per epoch.
  const int64_t steps = job.total_steps;
  const int64_t epochs = recipe.value("epochs", int64_t{1});
  const int64_t sequences = std::min(steps * batch, train.examples * epochs);
  // Tokens per sequence: measured on this model's finished jobs, else the
  // file's bytes per example at ~4 bytes a token.
  double per_seq = 0;
  std::string per_seq_source;
  {
    double toks = 0, seqs = 0;
    for (const JobRecord& j : jobs) {
      if (j.status != JobStatus::kSucceeded || j.trained_tokens <= 0 || j.step <= 0) continue;
      if (j.spec.value("base_model", "") != base) continue;
      // The same data: the same bytes, whatever upload they came from.
      auto f = md.GetFile(org_id, j.spec.value("training_file", ""));
      if (!f.ok() || f.value().sha256 != train.sha256) continue;
      const Json& r = j.spec.value("recipe", Json::object());
      toks += static_cast<double>(j.trained_tokens);
      seqs += static_cast<double>(j.step * r.value("batch_size", int64_t{1}) * r.value("grad_accum", int64_t{1}));
    }
    if (seqs > 0) {
      per_seq = toks / seqs;
      per_seq_source = "measured: earlier jobs of this model on the same data";
    }
  }
  if (per_seq <= 0) {
    per_seq = std::min<double>(static_cast<double>(max_seq),
                               static_cast<double>(train.bytes) / std::max<int64_t>(1, train.examples) / 4.0);
    per_seq_source = "estimated: the file's bytes per example at ~4 bytes a token";
  }
  const double tokens = per_seq * static_cast<double>(sequences);
  auto [tps, measured_jobs] = MeasuredThroughput(base, prices.threads_per_slot, jobs);
  std::string tps_source;
  if (measured_jobs > 0) {
    tps_source = "measured: " + std::to_string(measured_jobs) + " finished job(s) of " + model.id + " on " +
                 std::to_string(prices.threads_per_slot) + "-thread " + prices.slot_type + " slots";
  } else {
    // ~6 FLOPs per parameter per trained token at ~25 GFLOP/s per thread.
    tps = prices.threads_per_slot * 2.5e10 / (6.0 * static_cast<double>(std::max<int64_t>(1, model.parameters)));
    tps_source = "estimated from the model's size: no job of " + model.id + " has finished on this server yet";
  }
  const double seconds = tokens / tps;
  const double dedicated = seconds * prices.per_slot_second;
  const double serverless = tokens / 1e6 * prices.train_per_mtok;
  // The scope ParseJobRequest just chose.
  const BillingScope scope = RecordedScope(job.spec, "the estimated job").ValueOrThrow();
  return {{"object", "fine_tuning.job.estimate"},
          {"model", job.spec.value("model", "")},
          {"scope", ToString(scope)},
          {"scope_reason", job.spec.value("scope_reason", "")},
          {"total_steps", steps},
          {"sequences", sequences},
          {"tokens", std::llround(tokens)},
          {"tokens_per_sequence", per_seq},
          {"tokens_per_sequence_source", per_seq_source},
          {"tokens_per_second", tps},
          {"tokens_per_second_source", tps_source},
          {"seconds", seconds},
          {"cost", scope == BillingScope::kServerless ? serverless : dedicated},
          {"cost_if_dedicated", dedicated},
          {"cost_if_serverless", model.serverless ? Json(serverless) : Json()}};
}

}  // namespace burst
