#include "runtime/slurm_executor.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/subprocess.h"

namespace burst {

namespace {

// A shell word that means exactly `s`.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

bool SlurmStateEnded(const std::string& state) {
  for (const char* s : {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
                        "PREEMPTED", "TIMEOUT", "SPECIAL_EXIT", "REVOKED"}) {
    if (state.rfind(s, 0) == 0) return true;  // "CANCELLED by 0" in some versions
  }
  return false;
}

SlurmExecutor::SlurmExecutor(Clock& clock, SlurmExecutorOptions options) : clock_(clock), opt_(std::move(options)) {
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
      std::vector<std::string> names;
      for (const auto& [wid, j] : jobs_) names.push_back(opt_.job_prefix + wid);
      const uint64_t number = next_listing_++;
      lock.unlock();
      auto q = Queue(names);
      lock.lock();
      if (q) {
        listing_ = std::move(*q);
        listing_number_ = number;
      }
    }
    cv_.wait_for(lock, std::chrono::milliseconds(opt_.poll_interval_ms), [&] { return stop_; });
  }
}

std::string SlurmExecutor::Script(const WorkerLaunch& launch) const {
  std::ostringstream s;
  s << "#!/bin/sh\n"
    << "# Burst worker " << launch.worker_id << " (slot " << launch.slot << "), submitted by burst serve.\n"
    << "export BURST_URL=" << Quote(opt_.url) << "\n"
    << "export BURST_WORKER_ID=" << Quote(launch.worker_id) << "\n"
    << "export BURST_WORKER_TOKEN=" << Quote(launch.token) << "\n"
    << "export BURST_WORKER_DIR=" << Quote(opt_.scratch_dir + "/" + launch.worker_id) << "\n"
    << "export BURST_THREADS=" << launch.threads << "\n"
    << "export OMP_WAIT_POLICY=PASSIVE\n";
  for (const auto& [name, value] : opt_.env) s << "export " << name << "=" << Quote(value) << "\n";
  s << "exec " << Quote(opt_.exe) << " worker\n";
  return s.str();
}

std::vector<std::string> SlurmExecutor::SbatchArgs(const WorkerLaunch& launch, const std::string& script_path) const {
  std::vector<std::string> a = {"sbatch",
                                "--parsable",
                                "--job-name=" + opt_.job_prefix + launch.worker_id,
                                "--output=" + opt_.log_dir + "/" + launch.worker_id + ".log",
                                "--open-mode=append",
                                "--ntasks=1",
                                "--cpus-per-task=" + std::to_string(std::max(1, launch.threads)),
                                // Burst requeues the task itself (as preempted); Slurm must not
                                // start the same worker twice.
                                "--no-requeue",
                                "--export=NONE"};
  if (opt_.signal_before_s > 0) a.push_back("--signal=B:TERM@" + std::to_string(opt_.signal_before_s));
  if (!opt_.partition.empty()) a.push_back("--partition=" + opt_.partition);
  if (!opt_.account.empty()) a.push_back("--account=" + opt_.account);
  if (!opt_.gres.empty()) a.push_back("--gres=" + opt_.gres);
  if (opt_.mem_mb > 0) a.push_back("--mem=" + std::to_string(opt_.mem_mb));
  a.push_back(script_path);
  return a;
}

Result<int64_t> SlurmExecutor::Start(const WorkerLaunch& launch) {
  // sbatch reads the script when it submits and Slurm keeps its own copy:
  // the file (it holds the token) lives only for the call.
  namespace fs = std::filesystem;
  const fs::path script = fs::temp_directory_path() / ("burst-sbatch-" + launch.worker_id + ".sh");
  {
    std::ofstream f(script, std::ios::trunc);
    f << Script(launch);
    if (!f) return Status(Code::kUnavailable, "cannot write the batch script " + script.string(), "executor");
  }
  fs::permissions(script, fs::perms::owner_read | fs::perms::owner_write);
  auto r = RunCommand(SbatchArgs(launch, script.string()), opt_.command_timeout_ms);
  std::error_code ec;
  fs::remove(script, ec);
  if (!r.ok()) return r.status();
  const std::string id = Trim(r.value().out).substr(0, Trim(r.value().out).find(';'));  // "ID[;cluster]"
  if (r.value().exit_code != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    return Status(Code::kUnavailable,
                  "sbatch refused worker " + launch.worker_id + ": " + Trim(r.value().err + r.value().out),
                  "executor");
  }
  std::lock_guard<std::mutex> lock(mu_);
  jobs_[launch.worker_id] = Job{id, 0, next_listing_};
  return static_cast<int64_t>(std::stoll(id));
}

void SlurmExecutor::Cancel(const std::string& slurm_id, bool term_only) const {
  std::vector<std::string> a = {"scancel"};
  if (term_only) {
    a.push_back("--signal=TERM");
    a.push_back("--full");
  }
  a.push_back(slurm_id);
  auto r = RunCommand(a, opt_.command_timeout_ms);
  if (!r.ok() || r.value().exit_code != 0) {
    // The next Poll tells whether the job is gone anyway; a worker that
    // stays is stopped again when its scancel deadline passes.
    std::fprintf(stderr, "burst serve: %s failed: %s\n", CommandLine(a).c_str(),
                 r.ok() ? Trim(r.value().err).c_str() : r.status().ToString().c_str());
  }
}

void SlurmExecutor::Stop(const std::string& worker_id, int64_t grace_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(worker_id);
  if (it == jobs_.end()) return;
  Cancel(it->second.slurm_id, true);
  const int64_t deadline = clock_.NowMs() + grace_ms;
  if (it->second.kill_at_ms == 0 || deadline < it->second.kill_at_ms) it->second.kill_at_ms = deadline;
}

std::optional<SlurmExecutor::Listing> SlurmExecutor::Queue(const std::vector<std::string>& names) const {
  Listing out;
  if (names.empty()) return out;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ",") + n;
  const std::vector<std::string> a = {"squeue", "--noheader", "--states=all", "--name=" + list,
                                      "--format=%i|%j|%T"};
  auto r = RunCommand(a, opt_.command_timeout_ms);
  if (!r.ok() || r.value().exit_code != 0) {
    std::fprintf(stderr, "burst serve: %s failed (workers' exits are read again next time): %s\n",
                 CommandLine(a).c_str(), r.ok() ? Trim(r.value().err).c_str() : r.status().ToString().c_str());
    return std::nullopt;
  }
  std::istringstream lines(r.value().out);
  for (std::string line; std::getline(lines, line);) {
    const size_t a1 = line.find('|'), a2 = line.find('|', a1 == std::string::npos ? a1 : a1 + 1);
    if (a1 == std::string::npos || a2 == std::string::npos) continue;
    std::string id = line.substr(0, a1), name = line.substr(a1 + 1, a2 - a1 - 1), state = Trim(line.substr(a2 + 1));
    auto cur = out.find(name);
    // A name listed twice (a resubmission): the newest job counts.
    if (cur == out.end() || std::stoll(id) > std::stoll(cur->second.first)) out[name] = {id, state};
  }
  return out;
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
    auto e = listing_.find(opt_.job_prefix + it->first);
    std::string how;
    if (e == listing_.end() || e->second.first != it->second.slurm_id) {
      how = "gone";  // purged from Slurm's memory, or never there
    } else if (SlurmStateEnded(e->second.second)) {
      how = "slurm " + e->second.second;
    }
    if (!how.empty()) {
      out.push_back({it->first, now, how});
      it = jobs_.erase(it);
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
  auto q = Queue({opt_.job_prefix + worker_id});
  if (!q) return false;
  auto e = q->find(opt_.job_prefix + worker_id);
  if (e == q->end() || SlurmStateEnded(e->second.second)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  jobs_[worker_id] = Job{e->second.first, 0, next_listing_};
  return true;
}

}  // namespace burst
