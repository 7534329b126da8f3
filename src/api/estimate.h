// `burst jobs create --estimate` (POST /v1/fine_tuning/jobs/estimate): the
// expected tokens, time and cost of a job before anything starts, from its
// dataset, epochs and steps, and the throughput this server measured for
// that base model on its slots (the organisation's finished jobs with the
// same model and thread count). Without such a job yet, the numbers come
// from the file's size and the model's size, and the answer says so.
//
// On N workers (docs/cost-model.md): time = overhead + tokens / (N x a
// worker's compute throughput) + steps x the exchange's time, each part
// measured (the finished jobs' results carry their steps' timing) or
// estimated, and labelled so; dedicated cost = N x time x the slot price.
//
// Thread-safety: stateless. Errors: throw burst::Error.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "api/job_request.h"
#include "api/models.h"
#include "db/metadata.h"

namespace burst {

struct EstimatePrices {
  double per_slot_second = 0, train_per_mtok = 0;
  int threads_per_slot = 1;
  std::string slot_type = "cpu";
  int slots = 1;                            // more workers than this: a simulation (over_slots)
  std::string auto_communication = "c10d";  // what "auto" means on this server
  SlotPool pool;                            // a job's `gpu` is resolved against it
  std::map<std::string, double> per_gpu_second;
};

// The device a finished job trained on, as its worker's result says
// ({"cpu", 0} for a CPU slot, and for results from before it said).
std::pair<std::string, int64_t> JobDevice(const JobRecord& job);

// The cost model (docs/cost-model.md): one step's gradient exchange among
// `workers` of `floats` trainable floats, in seconds, by the formulas with
// the channel bench's constants (scaled by measurements in EstimateJob).
// Model averaging every K steps: the per-step stats plus a K-th of the
// weights and moments' exchange every K steps.
double ExchangeSeconds(const std::string& communication, int64_t workers, double floats,
                       int64_t average_every = 0);

// The floats a LoRA recipe trains on a Llama-layout model (its config.json);
// 0 for full fine-tunes or an unreadable config.
int64_t TrainableFloats(const std::filesystem::path& model_dir, const Json& recipe);

Json EstimateJob(const ParsedJob& job, const FileRecord& train, const ModelInfo& model,
                 const std::string& org_id, Metadata& md, const EstimatePrices& prices);

// The organisation's newest fine-tuning jobs (up to 500): what the figures
// are measured on.
std::vector<JobRecord> RecentJobs(const std::string& org_id, Metadata& md);

// Trained tokens per second per slot measured on those of `jobs` that
// finished with this base model and thread count on a CPU slot:
// {tokens_per_s, jobs} (jobs 0 = none measured).
std::pair<double, int64_t> MeasuredThroughput(const std::string& base_model, int threads,
                                              const std::vector<JobRecord>& jobs);

}  // namespace burst
