#include "runtime/slurm_executor.h"

#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

namespace burst {

bool SlurmStateEnded(const std::string& state) {
  for (const char* s : {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                        "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT", "SPECIAL_EXIT", "REVOKED"}) {
    if (state.rfind(s, 0) == 0) return true;  // "CANCELLED by 0" in some versions
  }
  return false;
}

SlurmExecutor::SlurmExecutor(Clock& clock, SlurmExecutorOptions options)
    : clock_(clock),
      opt_(std::move(options)),
      client_(opt_.rest_url.empty()
                  ? NewSlurmCli(opt_.command_timeout_ms)
                  : NewSlurmRest(opt_.rest_url, opt_.rest_user, opt_.rest_token, opt_.command_timeout_ms)) {
  // This server's numeric settings go with every worker, as a local one
  // inherits them (executor.h, kNumericsEnv), unless `env` names them.
  for (auto& kv : NumericsEnv(opt_.env)) opt_.env.push_back(std::move(kv));
  std::error_code ec;  // a shared or node-local path may not be ours to create; sbatch says so then
  std::filesystem::create_directories(opt_.log_dir, ec);
  poller_ = std::thread([this] { PollLoop(); });
}

SlurmExecutor::~SlurmExecutor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  poller_.join();
}

void SlurmExecutor::PollLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!jobs_.empty()) {
      std::set<std::string> names, groups;
      for (const auto& [wid, j] : jobs_) {
        names.insert(j.group.empty() ? opt_.job_prefix + wid : j.group);
        if (!j.group.empty()) groups.insert(j.slurm_id);
      }
      const uint64_t number = next_listing_++;
      lock.unlock();
      auto q = client_->Queue({names.begin(), names.end()});
      // The steps after the jobs: a step missing from this listing of a job
      // listed as running has ended, or not begun.
      std::optional<std::map<std::string, std::string>> steps;
      if (q && !groups.empty()) steps = client_->Steps({groups.begin(), groups.end()});
      lock.lock();
      if (q && (groups.empty() || steps)) {
        listing_ = std::move(*q);
        steps_ = steps ? std::move(*steps) : std::map<std::string, std::string>{};
        listing_number_ = number;
      }
    }
    cv_.wait_for(lock, std::chrono::milliseconds(opt_.poll_interval_ms), [&] { return stop_; });
  }
}

std::string WorkerGres(const std::string& operator_gres, const WorkerLaunch& launch) {
  // The operator's other GRES stay; a GPU count of theirs gives way to the
  // worker's own type and count, and a CPU worker holds no GPU idle.
  std::string out;
  std::istringstream in(operator_gres);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty() && item.rfind("gpu", 0) != 0) out += (out.empty() ? "" : ",") + item;
  if (launch.device == "cpu") return out;
  return out + (out.empty() ? "" : ",") + "gpu:" + launch.device + ":" + std::to_string(launch.gpus.size());
}

std::string SlurmExecutor::Script(const WorkerLaunch& launch) const {
  std::ostringstream s;
  s << "#!/bin/sh\n"
    << "# Burst worker " << launch.worker_id << " (slot " << launch.slot << "), submitted by burst serve.\n"
    << "export BURST_URL=" << ShellQuote(opt_.url) << "\n"
    << "export BURST_WORKER_ID=" << ShellQuote(launch.worker_id) << "\n"
    << "export BURST_WORKER_TOKEN=" << ShellQuote(launch.token) << "\n"
    << "export BURST_WORKER_DIR=" << ShellQuote(opt_.scratch_dir + "/" + launch.worker_id) << "\n"
    << "export BURST_THREADS=" << launch.threads << "\n";
  for (const auto& [name, value] : WorkerDeviceEnv(launch, false))
    s << "export " << name << "=" << ShellQuote(value) << "\n";
  for (const auto& [name, value] : opt_.env) s << "export " << name << "=" << ShellQuote(value) << "\n";
  s << "exec " << ShellQuote(opt_.exe) << " worker\n";
  return s.str();
}

Result<int64_t> SlurmExecutor::Start(const WorkerLaunch& launch) {
  SlurmJobSpec spec;
  spec.name = opt_.job_prefix + launch.worker_id;
  spec.script = Script(launch);
  spec.output = opt_.log_dir + "/" + launch.worker_id + ".log";
  spec.cpus = std::max(1, launch.threads);
  spec.partition = opt_.partition;
  spec.account = opt_.account;
  spec.gres = WorkerGres(opt_.gres, launch);
  spec.mem_mb = opt_.mem_mb;
  spec.signal_before_s = opt_.signal_before_s;  // sbatch only (slurm_client.h)
  auto id = client_->Submit(spec);
  if (!id.ok()) {
    return Status(id.status().code(),
                  client_->Name() + " refused worker " + launch.worker_id + ": " + id.status().message(),
                  "executor");
  }
  std::lock_guard<std::mutex> lock(mu_);
  Job& j = jobs_[launch.worker_id] = Job();
  j.slurm_id = id.value();
  j.first_listing = next_listing_;
  return static_cast<int64_t>(std::stoll(id.value()));
}

void SlurmExecutor::Cancel(const std::string& slurm_id, bool term_only, bool batch_shell) const {
  if (Status st = client_->Stop(slurm_id, term_only, batch_shell); !st.ok()) {
    // The next Poll tells whether the job is gone anyway; a worker that
    // stays is stopped again when its scancel deadline passes.
    std::fprintf(stderr, "burst serve: stopping Slurm job %s failed: %s\n", slurm_id.c_str(),
                 st.ToString().c_str());
  }
}

void SlurmExecutor::Stop(const std::string& worker_id, int64_t grace_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(worker_id);
  if (it == jobs_.end()) return;
  Job& j = it->second;
  const int64_t deadline = clock_.NowMs() + grace_ms;
  const bool again = j.kill_at_ms != 0;
  if (j.kill_at_ms == 0 || deadline < j.kill_at_ms) j.kill_at_ms = deadline;
  if (j.group.empty()) {
    Cancel(j.slurm_id, true);
  } else if (GroupStopping(j.group)) {
    if (!again) Cancel(j.slurm_id, true, /*batch_shell=*/false);  // every step; the shell then ends
  } else if (!j.step.empty()) {
    Cancel(j.step, true, false);
  } else {
    j.term_pending = true;  // signalled once its step is listed
  }
}

std::vector<WorkerExit> SlurmExecutor::Poll() {
  std::vector<WorkerExit> out;
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_.NowMs();
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (listing_number_ < it->second.first_listing) {  // not listed since it was submitted
      ++it;
      continue;
    }
    auto e = listing_.find(it->second.group.empty() ? opt_.job_prefix + it->first : it->second.group);
    std::string how;
    if (e == listing_.end() || e->second.id != it->second.slurm_id) {
      how = "gone";  // purged from Slurm's memory, or never there
    } else if (SlurmStateEnded(e->second.state)) {
      how = "slurm " + e->second.state;
    } else if (!it->second.group.empty()) {
      how = PollMember(it->first, it->second, now);
    }
    if (!how.empty()) {
      out.push_back({it->first, now, how});
      it = jobs_.erase(it);
      continue;
    }
    if (!it->second.group.empty()) {
      ++it;
      continue;
    }
    if (it->second.kill_at_ms != 0 && now >= it->second.kill_at_ms) {
      Cancel(it->second.slurm_id, false);
      it->second.kill_at_ms = 0;
    }
    ++it;
  }
  return out;
}

bool SlurmExecutor::Adopt(const std::string& worker_id, int64_t /*pid: the worker's own, on its node*/) {
  auto q = client_->Queue({opt_.job_prefix + worker_id});
  if (!q) return false;
  auto e = q->find(opt_.job_prefix + worker_id);
  if (e == q->end()) return AdoptMember(worker_id);
  if (SlurmStateEnded(e->second.state)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  Job& j = jobs_[worker_id] = Job();
  j.slurm_id = e->second.id;
  j.first_listing = next_listing_;
  return true;
}

}  // namespace burst
