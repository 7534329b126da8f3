// The control plane's vocabularies: a job's status, a worker's state, an
// attempt's outcome, a usage line, a billing scope and a task's kind. Code holds and
// compares these enums; they become strings only where they leave the
// process or come back: SQL rows, JSON (API responses, worker records, the
// workers' protocol). Every such crossing goes through the one table per
// enum below (ToString / FromString<E>), so a name can neither be misspelt
// in one place nor drift between writer and reader.
//
// The names are wire names (docs/api.md): renaming one changes what clients,
// workers and existing databases see, so they are extended, never edited.
//
// Here in core (not db) because the API, the runtime, the database layer and
// the CLI all use them, and core depends on nothing of Burst's. Header-only
// and torch-free.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/status.h"

namespace burst {

// A fine-tuning job's (or evaluation's) status; also a sweep's, whose
// values are a subset (running, succeeded, failed, cancelled).
// Paused: stopped by its owner after a state checkpoint, not queued, until
// resumed (not terminal).
enum class JobStatus { kValidatingFiles, kQueued, kRunning, kSucceeded, kFailed, kCancelled, kPaused };

// A worker process from its start request to its observed exit.
enum class WorkerState { kStarting, kIdle, kBusy, kStopping, kExited };

// How an attempt ended. A worker reports completed, preempted, cancelled or
// failed; lost and timeout are the control plane's own verdicts.
enum class AttemptOutcome { kCompleted, kPreempted, kLost, kTimeout, kCancelled, kFailed };

// The line of the usage ledger a stretch of worker time (or a token charge)
// is billed on.
enum class UsageLine { kStartup, kTraining, kEvaluation, kSampling, kDeployment, kIdle, kBatch };

// How work is billed: dedicated (slot-seconds) or serverless (tokens; the
// worker time is recorded at cost 0).
enum class BillingScope { kDedicated, kServerless };

// What a worker is given to do: a fine-tuning job's attempt, an
// evaluation's, a sampling call, one request of a training loop, (a
// deployment's replica) loading its checkpoint before calls come, or a
// batch's attempt (OpenAI's Batch API). A job's spec names train, eval or
// batch ("kind"); the task a worker leases says which.
enum class TaskKind { kTrain, kEval, kSample, kLoop, kWarm, kBatch };

// The names of each enum: one table, read both ways.
template <typename E>
struct StateNames;

template <>
struct StateNames<JobStatus> {
  static constexpr std::string_view kWhat = "job status";
  static constexpr std::array<std::pair<JobStatus, std::string_view>, 7> kNames = {{
      {JobStatus::kValidatingFiles, "validating_files"},
      {JobStatus::kQueued, "queued"},
      {JobStatus::kRunning, "running"},
      {JobStatus::kSucceeded, "succeeded"},
      {JobStatus::kFailed, "failed"},
      {JobStatus::kCancelled, "cancelled"},
      {JobStatus::kPaused, "paused"},
  }};
};

template <>
struct StateNames<WorkerState> {
  static constexpr std::string_view kWhat = "worker state";
  static constexpr std::array<std::pair<WorkerState, std::string_view>, 5> kNames = {{
      {WorkerState::kStarting, "starting"},
      {WorkerState::kIdle, "idle"},
      {WorkerState::kBusy, "busy"},
      {WorkerState::kStopping, "stopping"},
      {WorkerState::kExited, "exited"},
  }};
};

template <>
struct StateNames<AttemptOutcome> {
  static constexpr std::string_view kWhat = "attempt outcome";
  static constexpr std::array<std::pair<AttemptOutcome, std::string_view>, 6> kNames = {{
      {AttemptOutcome::kCompleted, "completed"},
      {AttemptOutcome::kPreempted, "preempted"},
      {AttemptOutcome::kLost, "lost"},
      {AttemptOutcome::kTimeout, "timeout"},
      {AttemptOutcome::kCancelled, "cancelled"},
      {AttemptOutcome::kFailed, "failed"},
  }};
};

template <>
struct StateNames<UsageLine> {
  static constexpr std::string_view kWhat = "usage line";
  static constexpr std::array<std::pair<UsageLine, std::string_view>, 7> kNames = {{
      {UsageLine::kStartup, "startup"},
      {UsageLine::kTraining, "training"},
      {UsageLine::kEvaluation, "evaluation"},
      {UsageLine::kSampling, "sampling"},
      {UsageLine::kDeployment, "deployment"},
      {UsageLine::kIdle, "idle"},
      {UsageLine::kBatch, "batch"},
  }};
};

template <>
struct StateNames<BillingScope> {
  static constexpr std::string_view kWhat = "billing scope";
  static constexpr std::array<std::pair<BillingScope, std::string_view>, 2> kNames = {{
      {BillingScope::kDedicated, "dedicated"},
      {BillingScope::kServerless, "serverless"},
  }};
};

template <>
struct StateNames<TaskKind> {
  static constexpr std::string_view kWhat = "task kind";
  static constexpr std::array<std::pair<TaskKind, std::string_view>, 6> kNames = {{
      {TaskKind::kTrain, "train"},
      {TaskKind::kEval, "eval"},
      {TaskKind::kSample, "sample"},
      {TaskKind::kLoop, "loop"},
      {TaskKind::kWarm, "warm"},
      {TaskKind::kBatch, "batch"},
  }};
};

template <typename E>
concept StateEnum = std::is_enum_v<E> && requires {
  StateNames<E>::kNames;
};

// The wire name of a value.
template <StateEnum E>
constexpr std::string_view ToString(E value) {
  for (const auto& [v, name] : StateNames<E>::kNames) {
    if (v == value) return name;
  }
  // Only a value cast from an integer outside the enum gets here.
  return "invalid";
}

// The value a wire name stands for. An unknown name is kInvalidArgument,
// `unknown job status "x" (expected one of: validating_files, queued, ...)`;
// callers reading their own database turn it into kDataLoss naming the row.
template <StateEnum E>
Result<E> FromString(std::string_view name) {
  for (const auto& [v, n] : StateNames<E>::kNames) {
    if (n == name) return v;
  }
  std::string known;
  for (const auto& [v, n] : StateNames<E>::kNames) known += (known.empty() ? "" : ", ") + std::string(n);
  return Status(Code::kInvalidArgument, "unknown " + std::string(StateNames<E>::kWhat) + " \"" +
                                            std::string(name) + "\" (expected one of: " + known + ")");
}

// Logs and test failures show the wire name.
template <StateEnum E>
std::ostream& operator<<(std::ostream& os, E value) {
  return os << ToString(value);
}

// Over for good: succeeded, failed or cancelled. Nothing changes a job's
// status after this.
constexpr bool IsTerminal(JobStatus s) {
  return s == JobStatus::kSucceeded || s == JobStatus::kFailed || s == JobStatus::kCancelled;
}

// A worker that has not exited (its process may still be running).
constexpr bool IsLive(WorkerState s) { return s != WorkerState::kExited; }

// Time spent on someone's work, as opposed to waiting for it.
constexpr bool IsWork(UsageLine l) { return l != UsageLine::kIdle; }

}  // namespace burst
