// WorkerCall: a call to a worker that its caller waits for, as the runtime
// queues, assigns and answers it (runtime.h: Sample, NextChunks, CancelCall):
// a sampling request, or one request of a training loop (a LoopCall).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/states.h"
#include "core/status.h"
#include "runtime/gpu_slots.h"

namespace burst {

// What one request of a training loop adds to its call (runtime/loops.h).
struct LoopCall {
  // The run a worker holding it should take it ("" = any worker: a sampling
  // client's sample). While a worker holding it lives and is not busy with a
  // job, the call waits for that worker; otherwise any idle worker takes it
  // (and restores the run).
  std::string affinity;
  // Goes into the task as "restore" only for a worker whose lease did not
  // report holding `affinity` (the run's restore recipe: the worker that
  // holds the run needs none, and it can be large: the requests since the
  // last snapshot, data included).
  Json restore;
  // A sample's first 16 prompt tokens (fewer: a prompt too short to share),
  // set by Sample: a batch whose calls start alike prefills the shared part
  // once, so such a call joins that batch before it takes an idle worker.
  std::vector<int64_t> prompt_head;
};

// A synchronous sampling request (POST /v1/completions and
// /v1/chat/completions), or a training loop's request: queued ahead of
// training tasks, run by a worker with the base model warm (and the
// checkpoint's adapter swapped in), answered to the waiting HTTP request.
// Nothing about it is durable but its usage.
struct WorkerCall {
  std::string id;  // "smpl-..."
  std::string org_id;
  std::string base_model;  // resolved folder; warm reuse is by it
  Json task;               // what the worker gets (docs/api.md, "Workers")
  int64_t created_ms = 0;
  // Filled by the runtime:
  std::string model_name;  // the model as the caller named it (shown in /v1/workers); "" = task.request.model
  std::string worker;
  bool cold = false;  // a worker had to be started for it
  bool delivered = false;
  bool done = false;        // set by Finish
  bool stream = false;      // the worker sends chunks as it samples
  std::deque<Json> chunks;  // streamed pieces not yet taken by NextChunks
  // Notified (under the runtime's mutex) when a piece arrives or the call
  // ends: the stream reading this call waits on it alone, not on the
  // runtime's condition, which every event of every call wakes. (A copy of
  // a call, as a loop's prototype call is copied, gets a condition of its own.)
  struct Condition : std::condition_variable {
    Condition() = default;
    Condition(const Condition&) : std::condition_variable() {}
    Condition& operator=(const Condition&) { return *this; }
  };
  Condition changed;
  void Finish() {
    done = true;
    changed.notify_all();
  }
  Json result;
  Status error;
  int64_t started_ms = 0, finished_ms = 0;
  std::string deployment;                         // routed to this deployment's replicas ("" = any worker)
  BillingScope scope = BillingScope::kDedicated;  // serverless: billed per token
  std::string run;  // the fine-tuning job whose checkpoint it samples ("" = a base model)
  // The workers that may take it (set by Runtime::Sample, not for a
  // deployment's call): empty for CPU workers, else those on one of these
  // GPU claims (RuntimeOptions::call_devices).
  std::vector<DeviceClaim> devices;
  // Set by CancelCall on a call a worker runs: the worker is told in the
  // answer to its next sample_chunks and reports what it sampled so far.
  bool cancelled = false;
  int64_t cancel_at_ms = 0;
  // Set for a training loop's request (the worker's task kind "loop": its
  // result is the worker's own, not samples); none for a sampling request.
  std::optional<LoopCall> loop;
  TaskKind kind() const { return loop ? TaskKind::kLoop : TaskKind::kSample; }
};

}  // namespace burst
