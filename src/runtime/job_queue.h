// JobQueue: the fine-tuning jobs the scheduler holds (runtime.h): one
// queue per organisation in submission order, every task queued or
// running, and the fair choice of the next one to dispatch: the
// organisation with the fewest tasks running, then the one served least
// recently (round robin), then its oldest task ready to run (past its
// backoff).
//
// A task stays here from its submission to its job's end: queued (in its
// organisation's queue, no worker), then running (counted for its
// organisation), then queued again after a lost or preempted attempt.
//
// Thread-safety: none of its own; the runtime's scheduler lock guards it
// (a dispatch decision reads it together with the workers).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/states.h"
#include "runtime/blas_facts.h"
#include "runtime/gpu_slots.h"
#include "runtime/job_gang.h"

namespace burst {

// A job's task: what the scheduler knows of it between attempts and during one.
struct JobTask {
  std::string job_id, org_id, model;
  std::string model_name;                 // as the job's owner named it (spec.model)
  UsageLine line = UsageLine::kTraining;  // training, or evaluation for an eval job
  BillingScope scope = BillingScope::kDedicated;
  std::string run;            // the run (job) its spend belongs to
  int64_t seq = 0;            // queue order
  int64_t not_before_ms = 0;  // backoff
  int64_t enqueued_ms = 0;    // when it (re)joined the queue: dispatch latency starts there or at not_before
  std::string worker;         // assigned worker ("" = queued)
  int64_t attempt = 0;
  int64_t lease_until_ms = 0;
  int64_t attempt_start_ms = 0;
  bool delivered = false;  // the worker has received it
  bool cancel = false;     // tell the worker to stop
  int64_t cancel_at_ms = 0;
  std::optional<AttemptOutcome> end_as;  // cancelled or timeout: how the running attempt will end
  int64_t timeout_ms = 0;                // the job's timeout_s (0 = none)
  int64_t run_ms_before = 0;             // time of its earlier attempts
  int64_t step = 0;
  bool step_unsaved = false;  // a heartbeat's step write failed (logged once until one succeeds)
  // One job on many workers (spec "workers" > 1): its shape, and the
  // members of its running attempt beyond rank 0 (`worker` above).
  JobGang gang;
  // What its newest state checkpoint was written with (unknown: none
  // reported since this control plane started, or not on the CPU).
  BlasFacts blas;
  // What it runs on, in order of preference: GPU claims from the job's
  // spec "gpu"; empty: a CPU slot.
  std::vector<DeviceClaim> devices;
  // Why it waits, once a dispatch round found no place for it ("" = it does
  // not, or not yet), shown on the job.
  std::string waiting_for;

  // Its queue among its organisation's: "cpu", or its GPU claims ("h100:2|l40s").
  std::string DeviceClass() const;

  // The rank `worker_id` holds in the attempt (0: the task's worker), or -1;
  // a member that finished still has its rank.
  int RankOf(const std::string& worker_id) const {
    return !worker.empty() && worker == worker_id ? 0 : gang.MemberRank(worker_id);
  }
  // Whether `rank` is on the attempt and has not reported its end.
  bool OnAttempt(int rank) const { return rank == 0 || (rank > 0 && !gang.member(rank).finished); }
  int64_t& LeaseOf(int rank) { return rank == 0 ? lease_until_ms : gang.member(rank).lease_until_ms; }
  bool& DeliveredOf(int rank) { return rank == 0 ? delivered : gang.member(rank).delivered; }
  // Whether any rank has received the attempt's task.
  bool AnyDelivered() const { return delivered || gang.AnyDelivered(); }
  // The attempt's workers, rank 0 first.
  std::vector<std::string> WorkerIds() const;
};

class JobQueue {
 public:
  // The next queue position (a requeued task goes behind those waiting).
  int64_t NextSeq() { return next_seq_++; }
  // Queues `t` (at the back of its organisation's queue, no worker; it
  // replaces the task of the same job, e.g. the attempt that just ended).
  void Enqueue(JobTask t);
  // Takes the job out of its organisation's queue (assigned, paused,
  // cancelled); the task itself stays until Erase (call this before).
  void Unqueue(const std::string& org, const std::string& job_id);
  void Erase(const std::string& job_id);
  // The job's task (queued or running), or nullptr.
  JobTask* Find(const std::string& job_id);
  const JobTask* Find(const std::string& job_id) const;

  // The task to dispatch next at `now` (the fair choice above, among each
  // organisation's first ready task of each device class), or nullptr when
  // no organisation has one past its backoff. Classes in `skip` are left
  // out: the scheduler skips a class whose next task cannot be placed now,
  // so that task holds back its own class (a gang is not overtaken by the
  // smaller tasks behind it) and no other.
  JobTask* Next(int64_t now, const std::set<std::string>& skip = {});
  // CPU workers the queued tasks ask for (a gang's task asks for several),
  // as they asked when queued; kept as a sum, so a dispatch round with many
  // tasks queued does not walk them all.
  size_t WorkersAsked() const { return static_cast<size_t>(asked_); }

  // The task's attempt has started: it counts for its organisation, which
  // was served at `serve_tick` (a counter the scheduler shares with the
  // sampling calls' round robin).
  void Started(const JobTask& t, int64_t serve_tick);
  // Adopted as running after a restart (its worker may come back).
  JobTask& AdoptRunning(JobTask t);
  // Its attempt is over (the task may be queued again or erased).
  void Stopped(const JobTask& t);
  bool IsRunning(const std::string& job_id) const { return running_ids_.count(job_id) > 0; }
  // Ids of the tasks running now (a copy: callers end attempts while walking it).
  std::vector<std::string> RunningIds() const { return {running_ids_.begin(), running_ids_.end()}; }

  // The organisation's jobs queued or running.
  int Active(const std::string& org) const;
  size_t QueuedCount() const;
  std::map<std::string, int64_t> QueuedByOrg() const;
  const std::map<std::string, JobTask>& tasks() const { return tasks_; }

 private:
  std::map<std::string, JobTask> tasks_;  // queued and running, by job id
  // org -> device class -> queued job ids in order
  std::map<std::string, std::map<std::string, std::deque<std::string>>> queue_;
  std::map<std::string, int64_t> asked_by_queued_;  // queued job id -> workers it asks for
  int64_t asked_ = 0;                               // their sum
  std::map<std::string, int> running_;              // org -> tasks running
  std::set<std::string> running_ids_;               // job ids with a worker
  std::map<std::string, int64_t> last_served_;      // org -> serve tick of its last task
  int64_t next_seq_ = 0;
};

}  // namespace burst
