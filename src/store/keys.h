// The object store's key layout, in one place: every key or folder Burst
// writes or reads is built (or taken apart) here.
//
//   orgs/{org}/files/{file}                        an uploaded file
//   orgs/{org}/jobs/{job}/                         a job's folder (the worker's store_prefix)
//   orgs/{org}/jobs/{job}/metrics.jsonl            its metrics, replayed on resume
//   orgs/{org}/jobs/{job}/checkpoints/step-NNNNNNNN/
//                                                  one checkpoint, with two halves:
//     .../sampler/                                 its loadable model (PEFT adapter or HF folder)
//     .../state/                                   its resume state
//   orgs/{org}/loops/{run}/                        a loop (docs/loops.md)
//   orgs/{org}/loops/{run}/weights/{name}/         its save_state checkpoints (state + manifest)
//   orgs/{org}/loops/{run}/sampler_weights/{name}/ its sampler checkpoints (PEFT adapter + manifest)
//   orgs/{org}/loops/{run}/snapshots/v{N}/         its restore points (state after N changes)
//   models/{digest}/manifest.json                  a base model shipped to workers
//   models/{digest}/files/{name}                   (store/model_store.h)
//
// The layout is a stable name (docs/design.md, section 9): data folders
// written by earlier versions must keep working, so it is extended, never
// changed. Checkpoint folders are named like a run folder's
// (train/checkpoint.h, StepDirName), so a worker copies one to the other
// unchanged.
//
// Header-only on purpose: the runtime names checkpoint folders in its
// records without linking the store itself. Ids are Burst's own ("org-...",
// "ftjob-..."), so every key built here passes ValidateKey.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace burst {

inline std::string FileKey(const std::string& org_id, const std::string& file_id) {
  return "orgs/" + org_id + "/files/" + file_id;
}

// A job's folder, ending in '/'.
inline std::string JobPrefix(const std::string& org_id, const std::string& job_id) {
  return "orgs/" + org_id + "/jobs/" + job_id + "/";
}

// A batch's (a job of kind batch) store objects, under its job's folder:
// the requests as the control plane checked them, the answered parts (part
// k holds lines [k*C, (k+1)*C), written whole), and each attempt's
// assembled output and error files ("output" or "errors").
inline std::string BatchRequestsKey(const std::string& job_prefix) {
  return job_prefix + "batch/requests.jsonl";
}
inline std::string BatchPartsPrefix(const std::string& job_prefix) { return job_prefix + "batch/parts/"; }
inline std::string BatchPartKey(const std::string& job_prefix, int64_t k) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08lld", static_cast<long long>(k));
  return BatchPartsPrefix(job_prefix) + buf + ".jsonl";
}
inline std::string BatchFileKey(const std::string& job_prefix, int64_t attempt, const std::string& name) {
  return job_prefix + "batch/a" + std::to_string(attempt) + "/" + name + ".jsonl";
}

// A training loop run's folder, ending in '/'.
inline std::string LoopPrefix(const std::string& org_id, const std::string& run_id) {
  return "orgs/" + org_id + "/loops/" + run_id + "/";
}
// Its checkpoint `kind` ("weights", "sampler_weights" or "external_weights") named `name`.
inline std::string LoopCheckpointPrefix(const std::string& loop_prefix, const std::string& kind,
                                        const std::string& name) {
  return loop_prefix + kind + "/" + name + "/";
}
// When that checkpoint expires ({"expires_at": unix seconds}), kept beside it.
inline std::string LoopTtlKey(const std::string& org_id, const std::string& run_id, const std::string& kind,
                              const std::string& name) {
  return LoopPrefix(org_id, run_id) + "ttl/" + kind + "/" + name + ".json";
}

inline std::string MetricsKey(const std::string& job_prefix) { return job_prefix + "metrics.jsonl"; }

// "step-00000100": eight digits at least, so folders sort by step.
inline std::string StepFolder(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

// A base model's folder, by the digest of its files, ending in '/'.
inline std::string ModelPrefix(const std::string& digest) { return "models/" + digest + "/"; }

// One checkpoint's folder under a job's folder, ending in '/'.
inline std::string CheckpointPrefix(const std::string& job_prefix, int64_t step) {
  return job_prefix + "checkpoints/" + StepFolder(step) + "/";
}

// The two halves of a checkpoint folder, each committed by its own manifest.
inline std::string SamplerPrefix(const std::string& checkpoint_prefix) {
  return checkpoint_prefix + "sampler/";
}
inline std::string StatePrefix(const std::string& checkpoint_prefix) { return checkpoint_prefix + "state/"; }

// The job whose folder holds `key` ("orgs/ORG/jobs/JOB/..." gives JOB), or
// the training loop run ("orgs/ORG/loops/RUN/..." gives RUN); "" for any
// other key, and for "" (a base model has no checkpoint prefix). Usage
// follows it: spend on a checkpoint is its run's.
inline std::string JobOfKey(std::string_view key) {
  constexpr std::string_view kOrgs = "orgs/", kJobs = "/jobs/", kLoops = "/loops/";
  if (key.substr(0, kOrgs.size()) != kOrgs) return "";
  const size_t org_end = key.find('/', kOrgs.size());
  if (org_end == std::string_view::npos || org_end == kOrgs.size()) return "";
  const std::string_view kind = key.substr(org_end, kJobs.size()) == kJobs ? kJobs : kLoops;
  if (key.substr(org_end, kind.size()) != kind) return "";
  const size_t job_begin = org_end + kind.size();
  const size_t job_end = key.find('/', job_begin);
  // A job id alone ("orgs/o/jobs/j") is no key under the job's folder.
  if (job_end == std::string_view::npos || job_end == job_begin) return "";
  return std::string(key.substr(job_begin, job_end - job_begin));
}

}  // namespace burst
