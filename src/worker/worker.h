// `burst worker`: one transient worker process (docs/design.md, section 1).
//
// Started by an executor when a task waits and a slot is free. It registers
// with the control plane, then leases tasks one at a time over
// /internal/v1 (docs/api.md, "Workers"). For each task it downloads the
// files and, when resuming, the newest committed state checkpoint from the
// object store; trains with a heartbeat thread renewing its lease; streams
// metrics, messages and its log as they happen; and uploads each checkpoint
// folder to the store (files first, manifest last) before reporting it.
//
// Between tasks it keeps the base model loaded; when no task has come for
// the scaledown window it tells the control plane and exits, so an idle
// Burst has no workers. SIGTERM is a preemption notice: a running task
// writes a state checkpoint at the next step boundary, reports `preempted`,
// and the worker exits. A 409 on a heartbeat means the lease went to someone
// else: the task is dropped without reporting anything more.
//
// Nothing durable lives here: the scratch folder is deleted after each task.
#pragma once

#include <string>

namespace burst {

struct WorkerConfig {
  std::string url;             // BURST_URL
  std::string id;              // BURST_WORKER_ID
  std::string token;           // BURST_WORKER_TOKEN
  std::string dir;             // BURST_WORKER_DIR: scratch space
  std::string device = "cpu";  // BURST_WORKER_DEVICE: a CPU slot, or the GPU type it holds
};

// Runs until the scaledown window passes with no task, SIGTERM, or the
// control plane says exit. Returns the process exit code.
int RunWorker(const WorkerConfig& config);

}  // namespace burst
