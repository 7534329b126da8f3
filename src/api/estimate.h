// `burst jobs create --estimate` (POST /v1/fine_tuning/jobs/estimate): the
// expected tokens, time and cost of a job before anything starts, from its
// dataset, epochs and steps, and the throughput this server measured for
// that base model on its slots (the organisation's finished jobs with the
// same model and thread count). Without such a job yet, the numbers come
// from the file's size and the model's size, and the answer says so.
//
// Thread-safety: stateless. Errors: throw burst::Error.
#pragma once

#include "api/job_request.h"
#include "api/models.h"
#include "db/metadata.h"

namespace burst {

struct EstimatePrices {
  double per_slot_second = 0, train_per_mtok = 0;
  int threads_per_slot = 1;
  std::string slot_type = "cpu";
};

Json EstimateJob(const ParsedJob& job, const FileRecord& train, const ModelInfo& model, const std::string& org_id,
                 Metadata& md, const EstimatePrices& prices);

// The organisation's newest fine-tuning jobs (up to 500): what the figures
// are measured on.
std::vector<JobRecord> RecentJobs(const std::string& org_id, Metadata& md);

// Trained tokens per second per slot measured on those of `jobs` that
// finished with this base model and thread count: {tokens_per_s, jobs}
// (jobs 0 = none measured).
std::pair<double, int64_t> MeasuredThroughput(const std::string& base_model, int threads,
                                              const std::vector<JobRecord>& jobs);

}  // namespace burst
