// Dispatch: per-organisation queues, the fair choice of the next task (the
// organisation with the fewest tasks running, then the one served least
// recently, then the oldest task), the choice of a worker (for a resumed
// task one with its checkpoint's BLAS, then one warm with the task's base
// model, then any idle one, else a new one while slots are free) and
// Assign, which starts an attempt. A dispatch round runs inside
// other calls, so what it cannot write is logged, never returned.
#include <algorithm>
#include <cstdio>
#include <set>

#include "core/fs.h"
#include "core/ids.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"

namespace burst {
using namespace runtime_internal;

Runtime::Placement Runtime::Place(const Task& t, int64_t now) {
  const size_t need = static_cast<size_t>(std::max<int64_t>(1, t.gang.size()));
  const std::vector<DeviceClaim> claims = t.devices.empty() ? std::vector<DeviceClaim>{{}} : t.devices;
  // An idle worker on a claim, in order of preference (a gang: enough of
  // them, warm ones first).
  for (const DeviceClaim& c : claims) {
    if (need == 1) {
      if (Worker* w = workers_.PickIdle(t.model, t.blas, c)) return {Placement::kIdle, c, {w}, 0};
      continue;
    }
    std::vector<Worker*> idle = workers_.IdleFor(t.model, c);
    if (idle.size() >= need) {
      idle.resize(need);
      return {Placement::kIdle, c, idle, 0};
    }
  }
  if (!workers_.MayStart(now)) return {};
  // Else new workers on the first claim with room. A CPU task waits while
  // as many CPU workers are starting as tasks and calls ask for; a GPU
  // task while workers are starting for it.
  for (const DeviceClaim& c : claims) {
    const size_t starting =
        static_cast<size_t>(c.gpu() ? workers_.StartingFor(t.job_id) : workers_.Starting());
    if (need == 1) {
      if (c.gpu() ? starting > 0 : starting >= jobs_.WorkersAsked() + CallsNeedingWorker(c)) return {};
      if (workers_.HasRoomFor(c, 1)) return {Placement::kStart, c, {}, 1};
      continue;
    }
    // A gang's missing workers start together (on Slurm, one allocation, so
    // no part of it holds resources while the rest wait) once there is room
    // for all of them.
    const size_t idle = workers_.IdleFor(t.model, c).size();
    if (idle + starting >= need) return {};
    if (workers_.HasRoomFor(c, need - idle - starting))
      return {Placement::kStart, c, {}, need - idle - starting};
  }
  return {};
}

void Runtime::NoteWaiting(Task& t, int64_t now) {
  if (t.devices.empty() || workers_.StartingFor(t.job_id) > 0) return;
  // A GPU task with no place: its job says what it waits for, once. GPUs
  // free but new workers backing off after failed starts say that instead.
  const size_t need = static_cast<size_t>(std::max<int64_t>(1, t.gang.size()));
  std::string why;
  for (const DeviceClaim& c : t.devices) {
    if (!workers_.MayStart(now) && workers_.HasRoomFor(c, need)) {
      why = c.Text() +
            " is free, but the last worker starts failed; the next try comes after a back-off "
            "(the workers' logs say why)";
      break;
    }
    const WorkerPool::GpuUse use = workers_.Use(c.type);
    why += std::string(why.empty() ? "" : " or ") + c.Text() + " (" + std::to_string(use.held) + " of " +
           std::to_string(use.total) + " " + c.type + " held)";
  }
  if (why != t.waiting_for) {
    t.waiting_for = why;
    AddEvent(md_, t.job_id, "Waiting for a GPU: " + why);
  }
}

bool Runtime::DispatchOne(int64_t now) {
  if (stopping_) return false;  // shutting down: requeued tasks wait for the next start
  if (DispatchDeployments(now)) return true;
  if (DispatchSample(now)) return true;
  const int64_t t0 = SteadyNs();
  // The organisation with the fewest tasks running; among equals, the one
  // served least recently (round robin), then the longest waiting task;
  // each device class on its own: a class whose next task has no place now
  // waits for it (a gang is not overtaken), and the other classes go on (a
  // GPU type all held holds back no CPU task, nor another type's).
  std::set<std::string> blocked;
  Task* best = nullptr;
  Placement p;
  while ((best = jobs_.Next(now, blocked)) != nullptr) {
    p = Place(*best, now);
    if (p.kind != Placement::kNone) break;
    NoteWaiting(*best, now);
    blocked.insert(best->DeviceClass());
  }
  // Nothing to train now, but a sampling call may need a worker started.
  if (!best) return StartWorkerForCall(now, blocked);
  // A resumed task first to a worker with the BLAS its state checkpoint was
  // written with (trainer.cpp refuses the resume on another), then warm,
  // then any idle one (WorkerPool::PickIdle); else new ones (Place).
  last_dispatch_ns_ = SteadyNs() - t0;
  best->waiting_for.clear();
  if (p.kind == Placement::kIdle) {
    Status s = Assign(*best, p.idle, now);
    if (!s.ok()) LogFailure("dispatch of " + best->job_id + " failed (it stays queued)", s);
    return s.ok();
  }
  return StartWorkers(now, p.start, best->org_id, best->job_id, nullptr, "", best->scope, best->run, p.claim);
}

bool Runtime::StartWorker(int64_t now, const std::string& org, const std::string& for_id, bool* cold,
                          const std::string& deployment, BillingScope scope, const std::string& run) {
  return StartWorkers(now, 1, org, for_id, cold, deployment, scope, run, DeviceClaim{});
}

bool Runtime::StartWorkers(int64_t now, size_t count, const std::string& org, const std::string& for_id,
                           bool* cold, const std::string& deployment, BillingScope scope,
                           const std::string& run, const DeviceClaim& claim) {
  // The callers checked there is room: CPU slots, or GPUs of the claim's type.
  const std::vector<int64_t> slots =
      claim.gpu() ? std::vector<int64_t>(count, -1) : workers_.FreeSlots(count);
  const std::vector<GpuSlot> gpus =
      claim.gpu() ? workers_.FreeGpus(claim.type, count * static_cast<size_t>(claim.count))
                  : std::vector<GpuSlot>{};
  if (slots.size() < count || gpus.size() < (claim.gpu() ? count * static_cast<size_t>(claim.count) : 0))
    return false;
  // A sampling call's cold start is part of that call's cost (its line is
  // sampling); a job's is its startup line; a replica's whole life is its
  // deployment's.
  const UsageLine line = !deployment.empty() ? UsageLine::kDeployment
                         : cold              ? UsageLine::kSampling
                                             : UsageLine::kStartup;
  std::vector<Worker> ws(count);
  std::vector<WorkerLaunch> launches;
  for (size_t i = 0; i < count; ++i) {
    Worker& w = ws[i];
    w.rec.id = NewId("wrk");
    const std::string token = NewSecret("bwt");
    w.rec.token_sha256 = Sha256Hex(token);
    w.rec.state = WorkerState::kStarting;
    w.rec.slot = slots[i];
    w.rec.requested_ms = now;
    w.rec.since_ms = now;
    w.rec.last_org = org;
    w.rec.deployment = deployment;
    WorkerLaunch launch;
    launch.worker_id = w.rec.id;
    launch.token = token;
    launch.slot = w.rec.slot;
    launch.threads = opt_.threads_per_slot;
    if (claim.gpu()) {
      w.rec.device = claim.type;
      launch.device = claim.type;
      for (size_t g = 0; g < static_cast<size_t>(claim.count); ++g) {
        const GpuSlot& gpu = gpus.at(i * static_cast<size_t>(claim.count) + g);
        w.rec.gpus.push_back(gpu.index);
        launch.gpus.push_back(gpu);
      }
    }
    meter_.Switch(w.rec, w.usage, now, line, org, for_id, scope, run);
    launches.push_back(std::move(launch));
  }
  // A gang's workers start together (on Slurm, one allocation).
  Result<GroupStart> started = GroupStart{};
  if (count == 1) {
    auto pid = exec_.Start(launches[0]);
    started = pid.ok() ? Result<GroupStart>(GroupStart{{pid.value()}, ""}) : Result<GroupStart>(pid.status());
  } else {
    started = exec_.StartGroup(launches);
  }
  if (!started.ok()) {
    workers_.StartFailed(now);
    LogFailure(
        count == 1 ? "cannot start a worker" : "cannot start " + std::to_string(count) + " workers together",
        started.status());
    for (Worker& w : ws) {
      w.rec.state = WorkerState::kExited;
      w.rec.exited_ms = now;
      w.rec.exit_reason = started.status().message();
      // Nothing ran, so nothing was billed; the record is what is kept.
      meter_.SaveExited(w.rec, std::move(w.usage));
    }
    return false;
  }
  std::string who;
  for (size_t i = 0; i < count; ++i) {
    Worker& w = ws[i];
    w.rec.pid = started.value().handles.at(i);
    SaveWorker(w).IgnoreError(kKept);
    who += std::string(i ? ", " : "") + w.rec.id + " (" + WhereText(w.rec) + ")";
    tokens_.Add(w.rec.token_sha256, w.rec.id);
    workers_.Add(std::move(w));
  }
  if (cold) {
    *cold = true;
  } else if (deployment.empty()) {
    const std::string how = started.value().how;
    AddEvent(md_, for_id,
             count == 1 ? "Starting worker " + who
                        : "Starting workers " + who + " together" + (how.empty() ? "" : " " + how));
  }
  return true;
}

Status Runtime::Assign(Task& t, const std::vector<Worker*>& ws, int64_t now) {
  Worker& w = *ws.at(0);
  auto rec = md_.GetJobById(t.job_id);
  if (!rec.ok()) return rec.status();
  JobRecord job = rec.value();
  job.attempts += 1;
  job.status = JobStatus::kRunning;
  if (job.started_at == 0) job.started_at = now / 1000;
  // The job's count first: an attempt row that fails after it leaves a gap
  // in the numbering (harmless) rather than a number used twice.
  if (Status s = md_.UpdateJob(job); !s.ok()) return s;
  AttemptRecord a;
  a.job_id = job.id;
  a.attempt = job.attempts;
  a.worker_id = w.rec.id;
  a.started_ms = now;
  a.resumed_from = job.resume_step;
  for (Worker* m : ws) {  // the cold starts made for it (a gang waits for its slowest)
    if (m->served) continue;
    a.queued_ms = std::max(a.queued_ms, m->rec.queued_ms);
    a.startup_ms = std::max(a.startup_ms, m->startup_ms);
  }
  if (Status s = md_.AddAttempt(a); !s.ok()) return s;
  jobs_.Unqueue(t.org_id, t.job_id);
  Metrics::Default().Observe("burst_dispatch_seconds", {{"kind", "job"}},
                             static_cast<double>(now - std::max(t.enqueued_ms, t.not_before_ms)) / 1000.0);
  t.worker = w.rec.id;
  t.attempt = job.attempts;
  t.lease_until_ms = now + opt_.lease_ttl_ms;
  t.attempt_start_ms = now;
  t.delivered = false;
  std::vector<std::string> members;
  for (size_t r = 1; r < ws.size(); ++r) members.push_back(ws[r]->rec.id);
  t.gang.Form(members, now + opt_.lease_ttl_ms);
  jobs_.Started(t, ++serve_counter_);
  std::string who;
  for (size_t r = 0; r < ws.size(); ++r) {
    Worker& m = *ws[r];
    m.served = true;
    m.member = ws.size() > 1;
    m.drain_since_ms = 0;
    m.rec.state = WorkerState::kBusy;
    m.rec.job_id = t.job_id;
    m.rec.attempt = t.attempt;
    m.rec.since_ms = now;
    m.rec.last_org = t.org_id;
    meter_.Switch(m.rec, m.usage, now, t.line, t.org_id, t.job_id, t.scope, t.run);
    SaveWorker(m).IgnoreError(kKept);
    if (r > 0) who += ", ";
    who += m.rec.id + (ws.size() > 1 ? " (rank " + std::to_string(r) + ")" : "") +
           (m.rec.model == t.model ? (ws.size() > 1 ? " warm" : " (base model already loaded)") : "");
  }
  AddEvent(md_, job.id,
           "Attempt " + std::to_string(t.attempt) + " assigned to worker" + (ws.size() > 1 ? "s " : " ") +
               who +
               (ws.size() > 1 ? "; " + std::to_string(ws.size()) + " workers exchanging gradients through " +
                                    (t.gang.communication() == "store" ? "the store" : "c10d Gloo")
                              : "") +
               (job.resume_step ? "; resuming from step " + std::to_string(job.resume_step) : ""));
  cv_.notify_all();
  return Status();
}

}  // namespace burst
