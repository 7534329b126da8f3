// SlurmExecutor: each worker is one Slurm batch job (sbatch), named
// "<job_prefix><worker id>", with the slot's CPUs (--cpus-per-task) and the
// operator's partition, account, memory and GRES. The job's script sets the
// worker's identity (BURST_URL, BURST_WORKER_ID, BURST_WORKER_TOKEN, ...)
// and execs `burst worker`, so the batch shell is the worker and Slurm's
// signals (scancel, preemption, the time limit's --signal warning) reach it.
// A worker on a cluster node reaches the control plane by `url` and the
// store by its URL; it assumes nothing of the control plane's filesystem
// but `exe` (the burst binary on the node) and `log_dir` (where its output
// goes: a shared path, or one on the node).
//
// Slurm is reached through its command-line tools or slurmrestd
// (runtime/slurm_client.h: `rest_url`). Exits are read from a listing
// (squeue `-t all` by job name, or slurmrestd's /jobs) on a thread of the
// executor's own every `poll_interval_ms`, never under the scheduler's lock:
// Poll() judges from the latest listing that began after a job's
// submission. A job that ended in any state, or that Slurm no longer
// lists, has exited. Stop is
// `scancel --signal=TERM --full` and, after the grace, `scancel`. Adopt
// finds a job a previous control plane submitted by its name, so nothing
// but the worker id needs to survive a restart. The job's script holds the
// worker's token: Slurm keeps it in its state folder, readable by the
// Slurm user only.
//
// A gang's workers (StartGroup) are one allocation where the transport
// sees job steps (the command-line tools): one batch job named
// "<job_prefix>gang-<first worker id>" of N tasks, its comment listing the
// workers, whose script starts each worker as a job step of its own
// (srun --exact), named "<job_prefix><worker id>", and waits for them. Slurm
// starts none before it has room for all, so no partial gang holds
// resources while the rest queue. Each member stays a worker of its own: its
// exit is its step's end (or the allocation's), Stop signals its step (the
// whole allocation once every member is stopping), and the time-limit
// warning goes to the steps. Through slurmrestd 22.05, which has no steps,
// and with a --gres (per node in sbatch, not per worker), each member is a
// job of its own as before (GroupStart::how says so).
//
// Every call runs Slurm's client tools (bounded by `command_timeout_ms`);
// a failed sbatch is kUnavailable with Slurm's own message.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/executor.h"
#include "runtime/slurm_client.h"

namespace burst {

struct SlurmExecutorOptions {
  std::string exe;          // the burst binary, as cluster nodes see it
  std::string url;          // the control plane, as workers reach it
  std::string log_dir;      // each worker's output: LOG_DIR/<worker>.log
  std::string scratch_dir;  // each worker's scratch space on its node
  std::string partition;    // --partition ("" = the cluster's default)
  std::string account;      // --account ("" = none)
  std::string gres;         // --gres, e.g. "gpu:1" ("" = none)
  int64_t mem_mb = 0;       // --mem (0 = the cluster's default)
  std::string job_prefix = "burst-";
  // Seconds before the time limit that Slurm warns a worker with SIGTERM
  // (--signal=B:TERM@N), so it writes a state checkpoint and leaves.
  int64_t signal_before_s = 120;
  int64_t command_timeout_ms = 30'000;
  int64_t poll_interval_ms = 1000;
  // Variables every worker's script exports besides Burst's own (the s3://
  // store's AWS_* credentials, --worker-env's: jobs run with --export=NONE).
  // They sit in the batch script as the worker token does: readable by the
  // job's user and Slurm's, nobody else. The constructor adds this
  // process's kNumericsEnv variables (executor.h) that `env` does not name.
  std::vector<std::pair<std::string, std::string>> env;
  // slurmrestd instead of sbatch/squeue/scancel: http(s)://host:port or
  // unix:/path; with a JWT (`scontrol token`) for `rest_user`, or none on a
  // unix socket (rest_auth/local).
  std::string rest_url, rest_user, rest_token;
};

// The --gres of a worker's job: the operator's (--slurm-gres) less any GPU
// there, and a GPU worker's own "gpu:TYPE:N".
std::string WorkerGres(const std::string& operator_gres, const WorkerLaunch& launch);

class SlurmExecutor : public Executor {
 public:
  SlurmExecutor(Clock& clock, SlurmExecutorOptions options);
  ~SlurmExecutor() override;
  Result<int64_t> Start(const WorkerLaunch& launch) override;  // the Slurm job id
  Result<GroupStart> StartGroup(const std::vector<WorkerLaunch>& launches) override;
  void Stop(const std::string& worker_id, int64_t grace_ms) override;
  std::vector<WorkerExit> Poll() override;
  bool Adopt(const std::string& worker_id, int64_t pid) override;
  void set_url(std::string url) { opt_.url = std::move(url); }

  // The batch script for a launch (what Start submits), for tests and logs.
  std::string Script(const WorkerLaunch& launch) const;
  // The batch script of a gang's allocation (what StartGroup submits).
  std::string GroupScript(const std::vector<WorkerLaunch>& launches) const;
  // A member's step not listed this long after its allocation runs never
  // started: its exit.
  static constexpr int64_t kStepStartGraceMs = 60'000;
  // How it reaches Slurm ("sbatch", "slurmrestd at URL").
  std::string Transport() const { return client_->Name(); }
  // The GPUs of the partition workers are submitted to (its nodes' GPU GRES).
  Result<std::vector<GpuSlot>> Gpus() { return client_->Gpus(opt_.partition); }
  // How a gang's workers start ("a gang is one allocation", or why not).
  std::string Gangs() const;

 private:
  struct Job {
    std::string slurm_id;
    int64_t kill_at_ms = 0;      // scancel deadline after a Stop (0 = none)
    uint64_t first_listing = 0;  // the first listing that can judge it
    // A gang member: the step named job_prefix + worker id of the
    // allocation named `group` ("" = a job of its own).
    std::string group;
    std::string step;               // its step id ("123.4") once listed
    bool term_pending = false;      // stopped before its step was listed
    bool killed = false;            // its kill was sent
    int64_t stepless_since_ms = 0;  // its allocation running, its step not listed yet
  };
  using Listing = std::map<std::string, SlurmJobState>;  // by job name
  void PollLoop();
  void Cancel(const std::string& slurm_id, bool term_only, bool batch_shell = true) const;
  // Poll's judgement of a gang member whose allocation is listed and has
  // not ended: its exit ("" = none yet); signals its step when due.
  std::string PollMember(const std::string& worker_id, Job& j, int64_t now);
  // Whether every member of allocation `group` still here is stopping.
  bool GroupStopping(const std::string& group) const;
  // Why a gang cannot be one allocation here ("" = it can).
  std::string NoGroupsBecause() const;
  // Adopt's second look: a gang allocation whose comment names the worker.
  bool AdoptMember(const std::string& worker_id);

  Clock& clock_;
  SlurmExecutorOptions opt_;
  std::unique_ptr<SlurmClient> client_;
  std::mutex mu_;  // guards what follows (the scheduler's calls and the poller)
  std::condition_variable cv_;
  std::map<std::string, Job> jobs_;  // worker id -> its Slurm job
  uint64_t next_listing_ = 1;        // the number the next squeue call gets
  uint64_t listing_number_ = 0;      // that of `listing_` (0: none yet)
  Listing listing_;
  std::map<std::string, std::string> steps_;  // that listing's gang steps: name -> step id
  bool stop_ = false;
  std::thread poller_;
};

// Slurm's job states that mean the job has ended.
bool SlurmStateEnded(const std::string& state);

}  // namespace burst
