// WorkerPool: the live workers as the scheduler holds them (PoolWorker: the
// record, the calls in hand, the usage not yet written, a replica's and a
// gang member's state), the slots they sit on, and when a new one may
// start: workers that fail to start, or exit before registering, in a row
// make new starts back off (0.5 s, doubling, at most 60 s), so a broken
// binary or machine never becomes a tight spawn loop.
//
// Thread-safety: none of its own; the runtime holds its scheduler's lock
// around every use (a dispatch decision weighs the workers together with
// the jobs and calls waiting).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "db/metadata.h"
#include "runtime/blas_facts.h"
#include "runtime/gpu_slots.h"
#include "runtime/meter.h"
#include "runtime/worker_call.h"

namespace burst {

struct PoolWorker {
  WorkerRecord rec;
  int64_t idle_since_ms = 0;
  // The sampling calls in hand: more than one = decoded as one batch
  // (same weights, same organisation: Runtime::BatchKey), in the order
  // assigned.
  std::vector<std::shared_ptr<WorkerCall>> calls;
  PendingUsage usage;   // segments closed since the last save (Meter)
  bool warmed = false;  // a replica that has been sent its checkpoint
  bool ready = false;   // a replica whose last lease said its checkpoint is loaded
  // A cold start's start-up (its queue time is rec.queued_ms), told to
  // the first attempt it runs.
  int64_t startup_ms = 0;
  bool served = false;
  std::set<std::string> held;  // affinity keys its last lease reported
  // Holds a rank of a gang's attempt. Once that attempt is over (another
  // member ended it) it is drained: busy until its next lease shows it
  // dropped the work (since drain_since_ms; stopped if it never does).
  bool member = false;
  int64_t drain_since_ms = 0;
  BlasFacts blas;  // as it registered (unknown after a restart adopted it)

  DeviceClaim claim() const { return ClaimOf(rec); }
  bool on_cpu() const { return rec.device == "cpu"; }
};

class WorkerPool {
 public:
  using Map = std::map<std::string, PoolWorker>;  // by worker id

  explicit WorkerPool(int slots, std::vector<GpuSlot> gpus = {}) : slots_(slots), gpus_(std::move(gpus)) {}

  // Whether `count` more CPU workers fit on the CPU slots (live ones hold
  // theirs until their exit is observed).
  bool HasRoomFor(size_t count = 1) const;
  // Whether `count` more workers of `claim` fit (CPU slots, or GPUs of its
  // type that no live worker holds).
  bool HasRoomFor(const DeviceClaim& claim, size_t count) const;
  // The lowest `count` CPU slots no live worker holds (fewer when there
  // are not as many).
  std::vector<int64_t> FreeSlots(size_t count) const;
  // The lowest `count` GPUs of `type` no live worker holds (fewer when
  // there are not as many).
  std::vector<GpuSlot> FreeGpus(const std::string& type, size_t count) const;
  const std::vector<GpuSlot>& gpus() const { return gpus_; }
  // The pool's GPUs of `type`, and how many of them live workers hold.
  struct GpuUse {
    int64_t total = 0, held = 0;
  };
  GpuUse Use(const std::string& type) const;

  // Whether a new worker may start now (not backing off).
  bool MayStart(int64_t now) const { return now >= no_start_before_ms_; }
  // One more start failed (the executor refused, or the worker exited
  // before registering): returns the time the next start waits for.
  int64_t StartFailed(int64_t now);
  // A worker registered: starts work again, no back-off.
  void StartWorked() { start_failures_ = 0; }

  // Dispatch's choices among the pool's workers (a deployment's replicas
  // serve their deployment only, so they are never weighed):
  // for a task, the idle worker that computes with `blas` (known: the BLAS
  // a resumed task's state checkpoint was written with; on another the
  // resume is refused), then one with `model` loaded, then any idle one,
  // the first of equals; nullptr when none is idle. A new worker's BLAS is
  // known once it registers, so only idle workers are weighed.
  // Only workers on `claim` are weighed.
  PoolWorker* PickIdle(const std::string& model, const BlasFacts& blas, const DeviceClaim& claim = {});
  // For a gang: every idle worker on `claim`, those with `model` loaded first.
  std::vector<PoolWorker*> IdleFor(const std::string& model, const DeviceClaim& claim = {});
  // Pool workers on `claim` starting (asked of the executor, not yet
  // registered): CPU ones by default.
  int Starting(const DeviceClaim& claim = {}) const;
  // GPU workers starting for `job_id` (their start-up is billed to it).
  int StartingFor(const std::string& job_id) const;

  PoolWorker& Add(PoolWorker w);
  PoolWorker* Find(const std::string& id);
  Map::iterator find(const std::string& id) { return live_.find(id); }
  Map::iterator erase(Map::iterator it) { return live_.erase(it); }
  size_t size() const { return live_.size(); }
  bool empty() const { return live_.empty(); }
  Map::iterator begin() { return live_.begin(); }
  Map::iterator end() { return live_.end(); }
  Map::const_iterator begin() const { return live_.begin(); }
  Map::const_iterator end() const { return live_.end(); }

 private:
  const int slots_;
  const std::vector<GpuSlot> gpus_;
  Map live_;
  int64_t start_failures_ = 0;  // in a row
  int64_t no_start_before_ms_ = 0;
};

}  // namespace burst
