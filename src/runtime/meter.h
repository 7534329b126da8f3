// Meter: the usage ledger's side of the runtime. A worker's life is cut into
// usage segments (startup, training, evaluation, sampling, deployment,
// idle) that telescope, so they add up to its observed lifetime; serverless
// work adds token charges on top. A segment is closed in memory
// (PendingUsage::closed) and written with the worker's record in one
// transaction (Save). A save that fails keeps the segments to be written
// again, also for a worker that has exited meanwhile (SaveExited,
// RetryExited), so the ledger never loses a closed segment to a failed
// write; every failure is logged on stderr.
//
// The open segment lives in the worker's record (WorkerRecord::seg_*), so
// a restart's recovery finds it there and closes it at its own time.
//
// Thread-safety: Switch and Charge change only what they are given. Save
// writes through Metadata (thread-safe) and changes only the usage it is
// given. The exited workers kept for another try have a lock of their own.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/states.h"
#include "db/metadata.h"
#include "runtime/gpu_slots.h"

namespace burst {

// What a worker's record says it holds: a CPU slot, or its GPUs of one type.
inline DeviceClaim ClaimOf(const WorkerRecord& r) {
  return r.device == "cpu" ? DeviceClaim{} : DeviceClaim{r.device, static_cast<int64_t>(r.gpus.size())};
}

// What a worker's record owes the ledger: the segments it closed since the
// record was last written, and how many writes of them failed in a row.
struct PendingUsage {
  std::vector<UsageRecord> closed;
  int64_t save_failures = 0;  // > 0: the record in the database is behind
};

class Meter {
 public:
  Meter(Metadata& md, double price_per_slot_second, std::map<std::string, double> price_per_gpu_second = {})
      : md_(md),
        price_per_slot_second_(price_per_slot_second),
        price_per_gpu_second_(std::move(price_per_gpu_second)) {}

  // The price of one second of the worker's device: a CPU slot, or its GPUs
  // (each at its type's price; a type without one is billed at 0 and logged).
  double PricePerSecond(const WorkerRecord& r) const;

  // Closes the worker's open segment at `at_ms` into `usage` (priced per
  // second of its device; serverless work's at 0, billed as tokens instead) and
  // opens `line` (none: the worker has exited). No `scope` = the scope of
  // the work served last (idle time follows it); idle time belongs to the
  // run served last. A replica's whole life is its deployment's: asked to
  // go idle, it stays on its deployment's segment.
  void Switch(WorkerRecord& r, PendingUsage& usage, int64_t at_ms, std::optional<UsageLine> line,
              const std::string& org, const std::string& job,
              std::optional<BillingScope> scope = std::nullopt, const std::string& run = "") const;
  // A serverless token charge (none for tokens <= 0).
  static void Charge(PendingUsage& usage, int64_t at_ms, UsageLine line, const std::string& org,
                     const std::string& job, const std::string& run, int64_t tokens, double cost);

  // Writes the record and the closed segments in one transaction, and adds
  // them to the operator's metrics. On failure the segments stay in
  // `usage`, the failure is logged (at the first and every 100th) and
  // returned.
  Status Save(const WorkerRecord& r, PendingUsage& usage);
  // An exited worker's last record: written now, or kept for RetryExited.
  void SaveExited(const WorkerRecord& r, PendingUsage usage);
  // An exited worker whose last save failed: kept for RetryExited.
  void KeepExited(const WorkerRecord& r, PendingUsage usage);
  // Writes again every exited worker kept; those written are forgotten.
  void RetryExited();

  // What is not yet written of the exited workers kept.
  struct Behind {
    size_t records = 0, segments = 0;
  };
  Behind ExitedBehind() const;

 private:
  struct Exited {
    WorkerRecord rec;
    PendingUsage usage;
  };

  Metadata& md_;
  const double price_per_slot_second_;
  const std::map<std::string, double> price_per_gpu_second_;
  mutable std::mutex mu_;                 // guards exited_
  std::map<std::string, Exited> exited_;  // by worker id
};

}  // namespace burst
