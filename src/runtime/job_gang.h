// JobGang: one job on many workers (docs/cost-model.md) as the scheduler holds
// it: the shape the job's spec asked for (how many workers, how they
// exchange gradients) and, during an attempt, the members on ranks
// 1..size-1 with their leases, deliveries and finishes, and rank 0's
// rendezvous address. Rank 0 is the task's own worker (JobTask::worker, its
// lease and delivery the task's), so a one-worker job is a gang of one with
// no members, and what reads rank 0 reads any job the same way.
//
// Thread-safety: none of its own; the scheduler's lock guards it (it is
// part of its job's task).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace burst {

struct GangMember {
  std::string worker;
  int64_t lease_until_ms = 0;
  bool delivered = false;  // the worker has received its rank's task
  bool finished = false;   // reported its end; the attempt goes on until rank 0's
};

class JobGang {
 public:
  JobGang() = default;
  JobGang(int64_t size, std::string communication) : size_(size), communication_(std::move(communication)) {}
  // The shape `spec` asks for: "workers" (default 1) and "communication"
  // ("auto", the default, is `auto_communication`).
  static JobGang FromSpec(const Json& spec, const std::string& auto_communication);
  // kInvalidArgument (param "workers") when more than one worker is asked
  // for and they do not fit on `slots` at once (one worker may wait for a
  // slot; a gang never would).
  Status FitsIn(int slots) const;

  int64_t size() const { return size_; }
  const std::string& communication() const { return communication_; }  // "c10d" or "store"

  // A new attempt: `workers` take ranks 1.. (rank 0 is the task's), each
  // leased until `lease_until_ms`; no rendezvous address yet.
  void Form(const std::vector<std::string>& workers, int64_t lease_until_ms);
  // Between attempts: no members, no address.
  void Clear();
  const std::vector<GangMember>& members() const { return members_; }
  // The member on `rank` (1..size-1).
  GangMember& member(int rank) { return members_.at(static_cast<size_t>(rank - 1)); }
  const GangMember& member(int rank) const { return members_.at(static_cast<size_t>(rank - 1)); }
  // The rank `worker` holds among the members (1..), or -1.
  int MemberRank(const std::string& worker) const;
  bool AnyDelivered() const;

  // c10d: rank 0's address in this attempt ("" = not published yet).
  const std::string& rendezvous() const { return rendezvous_; }
  // Rank 0 publishes its address: kInvalidArgument (param "address") over
  // 256 bytes; *changed when it differs from the one held.
  Status Publish(const std::string& address, bool* changed);

  // What the worker on `rank` is told of the gang (docs/api.md, "Workers"):
  // its rank, the size, the communication, the attempt's own channel under
  // `job_prefix` (a resumed run's exchange starts again at step 0 on files
  // no earlier start wrote), the member timeout and how often to average.
  Json MemberJson(int rank, const std::string& job_prefix, int64_t attempt, int64_t timeout_ms,
                  int64_t average_every) const;

 private:
  int64_t size_ = 1;
  std::string communication_;
  std::vector<GangMember> members_;  // ranks 1..size-1 of the running attempt
  std::string rendezvous_;
};

}  // namespace burst
