// The runtime's side of metering (the segments themselves: Meter,
// meter.h): a worker leaves the pool with its unwritten usage kept by the
// Meter, and every tick writes again what a failed save left behind, live
// or exited, so the usage ledger never loses a closed segment.
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"

namespace burst {
using namespace runtime_internal;

void Runtime::RetryUnsaved() {
  for (auto& [id, w] : workers_) {
    if (w.usage.save_failures > 0) SaveWorker(w).IgnoreError(kKept);
  }
  meter_.RetryExited();
}

void Runtime::RemoveWorker(WorkerPool::Map::iterator it) {
  tokens_.Remove(it->second.rec.token_sha256);
  if (it->second.usage.save_failures > 0) meter_.KeepExited(it->second.rec, std::move(it->second.usage));
  workers_.erase(it);
}

void Runtime::BackToIdle(Worker& w, int64_t now, const std::string& org) {
  if (w.rec.state == WorkerState::kBusy) {  // a worker told to stop meanwhile stays stopping
    w.rec.state = WorkerState::kIdle;
    w.rec.since_ms = now;
    w.idle_since_ms = now;
  }
  w.rec.job_id.clear();
  meter_.Switch(w.rec, w.usage, now, UsageLine::kIdle, org, "");
}

}  // namespace burst
