// One job on many workers (docs/cost-model.md): a job whose spec asks for N > 1
// workers runs as a gang. Dispatch gives it N idle workers at once (none
// trains until all have their lease), rank 0 being the task's `worker`;
// each member gets the task with its rank, the communication (c10d, with
// rank 0's rendezvous address published through Rendezvous, or the store
// channel under a prefix of the attempt's own) and the member timeout. The
// gang's own state (shape, members, rendezvous) is JobGang (job_gang.h).
//
// The attempt is one: any member's lapsed lease, exit or failure ends it
// for all (requeued, resumed from rank 0's last state checkpoint); rank 0's
// finish ends it as a one-worker finish does. The other members, still
// computing when it ends, are drained: busy (and billed to the job) until
// their next lease shows they dropped the work.
#include <algorithm>

#include "runtime/gpu_request.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"
#include "store/keys.h"

namespace burst {
using namespace runtime_internal;

namespace {
// How long a drained member may take to come back before it is stopped.
constexpr int64_t kDrainGraceMs = 30'000;
}  // namespace

Status Runtime::SetGang(Task& t, const JobRecord& j) const {
  t.gang = JobGang::FromSpec(j.spec, opt_.auto_communication);
  if (Status s = TaskDevices(j.spec, Pool(), std::max<int64_t>(1, t.gang.size()), &t.devices); !s.ok())
    return s;
  return t.devices.empty() ? t.gang.FitsIn(opt_.slots) : Status();
}

void Runtime::DrainGang(const Task& t, int64_t now) {
  if (t.gang.size() <= 1) return;
  for (const std::string& id : t.WorkerIds()) {
    auto w = workers_.find(id);
    if (w == workers_.end() || w->second.rec.job_id != t.job_id || w->second.rec.attempt != t.attempt)
      continue;
    if (w->second.drain_since_ms == 0) w->second.drain_since_ms = now;
  }
}

bool Runtime::Undrain(Worker& w, int64_t now) {
  if (!w.member || w.rec.state != WorkerState::kBusy || w.rec.job_id.empty()) return false;
  Task* t = jobs_.Find(w.rec.job_id);
  const int rank = t == nullptr ? -1 : t->RankOf(w.rec.id);
  const bool current =
      rank >= 0 && t->attempt == w.rec.attempt && jobs_.IsRunning(w.rec.job_id) && t->OnAttempt(rank);
  if (current) return false;
  // It asks for work, so it dropped what it had: the ended attempt's.
  w.member = false;
  w.drain_since_ms = 0;
  BackToIdle(w, now, w.rec.last_org);
  SaveWorker(w).IgnoreError(kKept);
  return true;
}

void Runtime::TickGangs(int64_t now) {
  for (const std::string& id : jobs_.RunningIds()) {
    Task* found = jobs_.Find(id);
    if (found == nullptr || found->gang.members().empty()) continue;
    Task& t = *found;
    for (size_t i = 0; i < t.gang.members().size(); ++i) {
      const GangMember m = t.gang.members()[i];
      if (m.finished) continue;
      const std::string rank =
          " (rank " + std::to_string(i + 1) + " of " + std::to_string(t.gang.size()) + ")";
      auto w = workers_.find(m.worker);
      const bool gone = w == workers_.end();
      if (!gone && now <= m.lease_until_ms) continue;
      if (!gone) Metrics::Default().Add("burst_lease_expiries_total");
      Json err = gone ? ErrorJson("worker_lost", "worker " + m.worker + rank + " is gone")
                      : ErrorJson("lease_expired", "no heartbeat from worker " + m.worker + rank + " for " +
                                                       std::to_string(opt_.lease_ttl_ms / 1000) + " s");
      if (Status s = EndAttempt(t, now, t.end_as.value_or(AttemptOutcome::kLost), err, !t.end_as, true);
          !s.ok()) {
        LogFailure("cannot end the attempt of " + id + " after losing worker " + m.worker +
                       " (tried again next tick)",
                   s);
        break;
      }
      if (!gone) StopWorker(w->second, "lease expired", 5000);
      break;  // `t` was requeued or erased
    }
  }
  for (auto& [id, w] : workers_) {
    if (w.drain_since_ms > 0 && w.rec.state == WorkerState::kBusy && now - w.drain_since_ms > kDrainGraceMs) {
      StopWorker(w, "did not drop the ended attempt of its gang", 5000);
    }
  }
}

Json Runtime::TaskJson(const JobRecord& job, const Task& t, int rank) const {
  const std::string prefix = JobPrefix(job.org_id, job.id);
  Json task = {{"job", job.id},
               {"attempt", t.attempt},
               {"org", job.org_id},
               {"kind", ToString(job.kind())},
               {"model", job.spec.value("base_model", job.spec.value("model", ""))},
               {"model_store", job.spec.value("base_model_store", "")},
               {"model_name", job.spec.value("model", "")},
               {"recipe", job.spec.value("recipe", Json::object())},
               {"training_file", job.spec.value("training_file", "")},
               {"validation_file", job.spec.value("validation_file", Json())},
               {"train_key", job.spec.value("train_key", "")},
               {"valid_key", job.spec.value("valid_key", "")},
               {"store_prefix", prefix},
               {"eval_key", job.spec.value("eval_key", "")},
               {"eval_file", job.spec.value("eval_file", "")},
               {"checkpoint_prefix", job.spec.value("checkpoint_prefix", "")},
               {"full", job.spec.value("full", false)},
               {"max_seq_len", job.spec.value("max_seq_len", int64_t{512})},
               {"batch_size", job.spec.value("batch_size", int64_t{8})},
               {"resume_step", job.resume_step},
               {"total_steps", job.total_steps}};
  if (job.kind() == TaskKind::kBatch) task["batch"] = job.spec.value("batch", Json::object());
  if (t.gang.size() > 1) {
    task["member"] = t.gang.MemberJson(rank, prefix, t.attempt, opt_.member_timeout_ms,
                                       job.spec.value("average_every", int64_t{0}));
  }
  return task;
}

Result<std::string> Runtime::Rendezvous(const std::string& worker_id, const std::string& job_id,
                                        int64_t attempt, const std::string& address, int64_t wait_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t deadline = clock_.NowMs() + std::clamp<int64_t>(wait_ms, 0, 30'000);
  int rank = -1;
  auto t = RunningTask(worker_id, job_id, attempt, &rank);
  if (!t.ok()) return t.status();
  if (!address.empty()) {
    if (rank != 0)
      return Status(Code::kInvalidArgument, "only rank 0 publishes the rendezvous address", "address");
    bool changed = false;
    if (Status s = t.value()->gang.Publish(address, &changed); !s.ok()) return s;
    if (changed) {
      AddEvent(md_, job_id,
               "Rendezvous: rank 0 (worker " + worker_id + ") serves c10d at " + address + " for " +
                   std::to_string(t.value()->gang.size()) + " workers");
      cv_.notify_all();
    }
    return address;
  }
  for (;;) {
    auto again = RunningTask(worker_id, job_id, attempt);
    if (!again.ok()) return again.status();
    if (!again.value()->gang.rendezvous().empty()) return again.value()->gang.rendezvous();
    if (!clock_.WaitUntil(cv_, lock, deadline)) return std::string();
  }
}

}  // namespace burst
