// SlurmClient: how the Slurm executor talks to Slurm. Two transports with
// one meaning:
//
//   - the command-line tools (NewSlurmCli): sbatch (the script on stdin's
//     stead, in a file that lives for the call), squeue, scancel; the
//     default, needing a Slurm client configured for the cluster;
//   - slurmrestd's REST API, v0.0.38 (Slurm 22.05; NewSlurmRest), where
//     the operator gives its address (`burst serve --slurm-rest URL`):
//     http://host:port or unix:/path/to/socket, authenticated with a JWT
//     (X-SLURM-USER-NAME / X-SLURM-USER-TOKEN; `scontrol token` makes one)
//     or, on a unix socket, by the caller's uid (rest_auth/local).
//
// Differences that show: the REST API of 22.05 cannot aim the time-limit
// warning at the batch shell (no "B:" in its signal field; the worker is
// the batch shell), so REST jobs get none: a time limit ends them like a
// lost node, and the task resumes from its newest state checkpoint. Stops
// mean the same on both: SIGTERM to the job (the worker checkpoints and
// leaves), and after the executor's grace a SIGKILL.
//
// Thread-safety: every method may be called from any thread.
// Errors: a submission Slurm refuses is kUnavailable with Slurm's own
// message; a listing that fails is nullopt (the next one is tried).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "runtime/gpu_slots.h"

namespace burst {

// One worker's batch job, or one allocation for a gang's workers.
struct SlurmJobSpec {
  std::string name;    // Slurm's job name
  std::string script;  // the batch script's text
  std::string output;  // the file its output is appended to
  int cpus = 1;        // per task
  // 1: the batch shell is the worker. More: one allocation of `tasks`
  // tasks whose job steps are the workers (the batch shell only waits for
  // them), so the time-limit warning goes to the steps, not the shell.
  int tasks = 1;
  std::string comment;                   // --comment ("" = none)
  std::string partition, account, gres;  // "" = the cluster's default / none
  int64_t mem_mb = 0;                    // per node; 0 = the cluster's default
  int64_t mem_per_cpu_mb = 0;            // instead of mem_mb; 0 = none
  int64_t signal_before_s = 0;           // SIGTERM this long before the time limit; 0 = none
};

// A job as a listing shows it: its id and state (PENDING, RUNNING, ...).
struct SlurmJobState {
  std::string id;
  std::string state;
};

// A job of this user, as the adoption listing shows it.
struct SlurmJobListing {
  std::string id, name, state, comment;
};

class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  // The new job's id.
  virtual Result<std::string> Submit(const SlurmJobSpec& spec) = 0;
  // The jobs named `names` that Slurm still lists, in any state, by name
  // (a name listed twice: the newest job); nullopt when listing failed.
  virtual std::optional<std::map<std::string, SlurmJobState>> Queue(
      const std::vector<std::string>& names) = 0;
  // term_only: SIGTERM to the job (the worker writes a state checkpoint
  // and leaves); else cancel it. `id` is a job ("123") or a job step
  // ("123.4"); batch_shell: the TERM reaches the batch shell too (a
  // one-worker job, whose shell is the worker), else only the steps.
  // Failures are Status, for the log.
  virtual Status Stop(const std::string& id, bool term_only, bool batch_shell = true) = 0;
  // Whether this transport sees and signals job steps (a gang's workers in
  // one allocation); slurmrestd 22.05 (v0.0.38) does not.
  virtual bool HasSteps() const { return false; }
  // The running steps of jobs `ids`, step name -> step id ("123.4"), the
  // batch step left out; nullopt when listing failed or HasSteps() is false.
  virtual std::optional<std::map<std::string, std::string>> Steps(const std::vector<std::string>& ids) {
    (void)ids;
    return std::nullopt;
  }
  // This user's jobs that have not ended, with their comments (to adopt a
  // gang's allocation after a restart); nullopt when listing failed.
  virtual std::optional<std::vector<SlurmJobListing>> Mine() { return std::nullopt; }
  // The GPUs of `partition` ("" = the default one): each node's GPU GRES
  // ("gpu:h100:4"), one GpuSlot per GPU, numbered within its type.
  virtual Result<std::vector<GpuSlot>> Gpus(const std::string& partition) = 0;
  // "sbatch" or "slurmrestd at URL", for messages.
  virtual std::string Name() const = 0;
};

// Adds the GPUs of one node's GRES ("gpu:h100:4(S:0-1),gpu:l40s:1,shard:8";
// an untyped "gpu:2" is of type "gpu") to `counts`, by type.
void AddGresGpus(const std::string& gres, std::map<std::string, int64_t>* counts);

// One slot per GPU of `counts`, each named after `where`.
std::vector<GpuSlot> GpuSlotsOf(const std::map<std::string, int64_t>& counts, const std::string& where);

std::unique_ptr<SlurmClient> NewSlurmCli(int64_t command_timeout_ms);

// `url`: http(s)://host:port or unix:/path; `user` and `token` for JWT
// authentication (both empty: the unix socket's own, rest_auth/local).
std::unique_ptr<SlurmClient> NewSlurmRest(const std::string& url, const std::string& user,
                                          const std::string& token, int64_t timeout_ms);

// Writes sbatch's script file, which holds the worker's token, as a new
// file readable and writable by this user only from the moment it exists
// (whatever the umask). A file or link already at `path` is refused
// (kUnavailable), never written into; a failed write removes the file.
Status WriteBatchScript(const std::filesystem::path& path, const std::string& script);

// A shell word that means exactly `s`.
std::string ShellQuote(const std::string& s);

}  // namespace burst
