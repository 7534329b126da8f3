// A gang's workers as one Slurm allocation (slurm_executor.h): the batch
// script that starts each worker as a job step, and how a member's exit,
// stop and adoption are read from its step.
#include <algorithm>
#include <sstream>

#include "runtime/slurm_executor.h"

namespace burst {

namespace {
int MaxThreads(const std::vector<WorkerLaunch>& launches) {
  int threads = 1;
  for (const WorkerLaunch& l : launches) threads = std::max(threads, l.threads);
  return threads;
}

std::string Ids(const std::vector<WorkerLaunch>& launches) {
  std::string out;
  for (const WorkerLaunch& l : launches) out += (out.empty() ? "" : " ") + l.worker_id;
  return out;
}
}  // namespace

std::string SlurmExecutor::GroupScript(const std::vector<WorkerLaunch>& launches) const {
  std::ostringstream s;
  s << "#!/bin/sh\n"
    << "# Burst gang of " << launches.size() << " workers (";
  for (size_t i = 0; i < launches.size(); ++i) {
    s << (i ? ", " : "") << launches[i].worker_id << " slot " << launches[i].slot;
  }
  s << "), submitted by burst serve.\n"
    << "# Each worker is a job step of its own, named after it; this shell only waits for them.\n"
    << "export BURST_URL=" << ShellQuote(opt_.url) << "\n";
  for (const auto& [name, value] : opt_.env) s << "export " << name << "=" << ShellQuote(value) << "\n";
  // A TERM aimed at this shell is no reason to end the allocation under
  // workers still writing their state checkpoints.
  s << "trap ':' TERM INT\n";
  // --slurm-mem-mb is per worker.
  const int64_t mem_per_cpu =
      opt_.mem_mb > 0 ? (opt_.mem_mb + MaxThreads(launches) - 1) / MaxThreads(launches) : 0;
  for (const WorkerLaunch& l : launches) {
    s << "BURST_WORKER_ID=" << ShellQuote(l.worker_id) << " BURST_WORKER_TOKEN=" << ShellQuote(l.token)
      << " BURST_WORKER_DIR=" << ShellQuote(opt_.scratch_dir + "/" + l.worker_id)
      << " BURST_THREADS=" << l.threads;
    for (const auto& [name, value] : WorkerDeviceEnv(l, false)) s << " " << name << "=" << ShellQuote(value);
    s << " \\\n  srun --export=ALL --nodes=1 --ntasks=1 --cpus-per-task=" << MaxThreads(launches)
      << " --exact";
    if (mem_per_cpu > 0) s << " --mem-per-cpu=" << mem_per_cpu;
    s << " --job-name=" << ShellQuote(opt_.job_prefix + l.worker_id)
      << " --output=" << ShellQuote(opt_.log_dir + "/" + l.worker_id + ".log") << " --open-mode=append \\\n  "
      << ShellQuote(opt_.exe) << " worker &\n";
  }
  s << "until wait; do :; done\n";
  return s.str();
}

std::string SlurmExecutor::NoGroupsBecause() const {
  if (!client_->HasSteps()) return client_->Name() + " shows no job steps";
  if (!opt_.gres.empty()) return "--slurm-gres is per node, not per worker, in a shared allocation";
  return "";
}

std::string SlurmExecutor::Gangs() const {
  const std::string why = NoGroupsBecause();
  return why.empty() ? "a gang is one allocation" : "a gang is one job per worker: " + why;
}

Result<GroupStart> SlurmExecutor::StartGroup(const std::vector<WorkerLaunch>& launches) {
  if (launches.size() < 2) return Executor::StartGroup(launches);
  std::string why = NoGroupsBecause();
  if (why.empty() && launches[0].device != "cpu") why = "GPU workers ask for their GPUs in a job each";
  if (!why.empty()) {
    auto g = Executor::StartGroup(launches);
    if (g.ok()) g.value().how = "as one Slurm job each (" + why + ")";
    return g;
  }
  const int threads = MaxThreads(launches);
  SlurmJobSpec spec;
  spec.name = opt_.job_prefix + "gang-" + launches[0].worker_id;
  spec.script = GroupScript(launches);
  spec.output = opt_.log_dir + "/gang-" + launches[0].worker_id + ".log";
  spec.cpus = threads;
  spec.tasks = static_cast<int>(launches.size());
  spec.comment = "burst gang: " + Ids(launches);
  spec.partition = opt_.partition;
  spec.account = opt_.account;
  if (opt_.mem_mb > 0) spec.mem_per_cpu_mb = (opt_.mem_mb + threads - 1) / threads;  // as each step asks
  spec.signal_before_s = opt_.signal_before_s;
  auto id = client_->Submit(spec);
  if (!id.ok()) {
    return Status(
        id.status().code(),
        client_->Name() + " refused the gang of workers " + Ids(launches) + ": " + id.status().message(),
        "executor");
  }
  GroupStart g;
  std::lock_guard<std::mutex> lock(mu_);
  for (const WorkerLaunch& l : launches) {
    Job& j = jobs_[l.worker_id] = Job();
    j.slurm_id = id.value();
    j.first_listing = next_listing_;
    j.group = spec.name;
    g.handles.push_back(static_cast<int64_t>(std::stoll(id.value())));
  }
  g.how = "as one Slurm allocation (job " + id.value() + ", a job step each)";
  return g;
}

bool SlurmExecutor::GroupStopping(const std::string& group) const {
  for (const auto& [wid, j] : jobs_)
    if (j.group == group && j.kill_at_ms == 0) return false;
  return true;
}

std::string SlurmExecutor::PollMember(const std::string& worker_id, Job& j, int64_t now) {
  auto s = steps_.find(opt_.job_prefix + worker_id);
  if (s != steps_.end()) {
    j.step = s->second;
    j.stepless_since_ms = 0;
    if (j.term_pending) {
      Cancel(j.step, true, false);
      j.term_pending = false;
    }
  } else if (!j.step.empty()) {
    return "slurm step " + j.step + " ended";
  } else if (listing_.at(j.group).state == "RUNNING") {
    if (j.stepless_since_ms == 0) j.stepless_since_ms = now;
    if (now - j.stepless_since_ms > kStepStartGraceMs) {
      return "its step never started in Slurm job " +
             j.slurm_id;  // a late one is refused by the control plane
    }
  }
  if (j.kill_at_ms == 0 || j.killed || now < j.kill_at_ms) return "";
  if (GroupStopping(j.group)) {
    Cancel(j.slurm_id, false);  // the whole allocation, pending or not
    for (auto& [wid, m] : jobs_)
      if (m.group == j.group) m.killed = true;
  } else if (!j.step.empty()) {
    Cancel(j.step, false);
    j.killed = true;
  }
  return "";
}

bool SlurmExecutor::AdoptMember(const std::string& worker_id) {
  if (!client_->HasSteps()) return false;
  auto mine = client_->Mine();
  if (!mine) return false;
  for (const SlurmJobListing& job : *mine) {
    if (job.name.rfind(opt_.job_prefix + "gang-", 0) != 0 || SlurmStateEnded(job.state)) continue;
    std::istringstream words(job.comment);
    for (std::string w; words >> w;) {
      if (w != worker_id) continue;
      if (job.state == "RUNNING") {
        // Its step ended (or has not begun: a late one is refused by the
        // control plane, which no longer knows the worker).
        auto steps = client_->Steps({job.id});
        if (!steps || !steps->count(opt_.job_prefix + worker_id)) return false;
      }
      std::lock_guard<std::mutex> lock(mu_);
      Job& j = jobs_[worker_id] = Job();
      j.slurm_id = job.id;
      j.first_listing = next_listing_;
      j.group = job.name;
      return true;
    }
  }
  return false;
}

}  // namespace burst
