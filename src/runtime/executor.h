// Executors start and stop worker processes (docs/design.md, section 1).
//
// The runtime asks for a worker only when a task is waiting and a slot is
// free, and learns that a worker has gone only from Poll(): billing ends at
// the exit an executor observes. Implementations: FakeExecutor (scheduler
// tests; nothing runs) and LocalExecutor (child processes on this machine).
//
// Thread-safety: the runtime calls an executor under its own lock; an
// executor needs no locking of its own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "runtime/gpu_slots.h"

namespace burst {

// Injected time, so scheduler tests advance it instead of sleeping. Every
// wait of the scheduler goes through its clock too: a deadline is a time on
// this clock, so a test that advances a FakeClock past it ends the wait
// without any real time passing.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() = 0;  // unix milliseconds
  // Waits on `cv` (`lock` held on entry and on return) until it is notified
  // or this clock reaches `deadline_ms`. False when the deadline has passed;
  // true on a notification (or a spurious wakeup): callers re-check their
  // condition in a loop.
  virtual bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         int64_t deadline_ms);
};

class SystemClock : public Clock {
 public:
  int64_t NowMs() override;
};

// Time moves only by Advance(), which also wakes every WaitUntil in
// progress, so a waiter whose deadline the fake time passed returns.
// Thread-safe: NowMs/Advance/WaitUntil may be called from any thread.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  int64_t NowMs() override { return now_.load(); }
  // Not to be called with the mutex of a waiter held (it takes each in turn
  // to deliver its wakeup without a race).
  void Advance(int64_t ms);
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 int64_t deadline_ms) override;
  // Waits in progress now (tests use it to know a thread is parked).
  int waiting();

 private:
  struct Waiter {
    std::condition_variable* cv;
    std::mutex* mu;
  };
  std::atomic<int64_t> now_;
  std::mutex waiters_mu_;
  std::list<Waiter> waiters_;
};

// Variables that change what a worker computes (which numeric kernels run)
// and that Burst neither sets nor records itself: the same job, seed and
// thread count give other bytes under another value. Every executor gives a
// worker this process's (`burst serve`'s) value of each one that is set, so
// the workers of one control plane compute alike wherever they run: the
// local executor by inheritance, the Slurm one in the job's script (its
// workers run with --export=NONE; a name given to --worker-env keeps the
// value given there). Left out on purpose: thread counts (OMP_NUM_THREADS,
// OPENBLAS_NUM_THREADS, MKL_NUM_THREADS: Burst sets a worker's from its
// slot and records them) and what changes only speed (OMP_WAIT_POLICY,
// OPENBLAS_THREAD_TIMEOUT, OPENBLAS_VERBOSE). docs/deploy.md lists them.
inline constexpr const char* kNumericsEnv[] = {
    "OPENBLAS_CORETYPE",      // OpenBLAS's kernels (recorded as "blas": core/blas_core.h)
    "OPENBLAS_L2_SIZE",       // OpenBLAS's GEMM blocking (where the order of a sum's terms
    "OPENBLAS_BLOCK_FACTOR",  // comes from)
    "MKL_CBWR",               // MKL's code path, for a libtorch on MKL
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_DEBUG_CPU_TYPE",
    "ATEN_CPU_CAPABILITY",  // libtorch's own vectorised kernels (default, avx2, avx512)
    "DNNL_MAX_CPU_ISA",     // oneDNN's (libtorch's mkldnn kernels)
    "ONEDNN_MAX_CPU_ISA",
    "NVIDIA_TF32_OVERRIDE",     // TF32 in every CUDA matmul, whatever the program asks
    "CUBLAS_WORKSPACE_CONFIG",  // cuBLAS's reproducible workspaces
};

// The kNumericsEnv variables set in this process, with their values, less
// those `given` names (the operator's own choice wins).
std::vector<std::pair<std::string, std::string>> NumericsEnv(
    const std::vector<std::pair<std::string, std::string>>& given = {});

struct WorkerLaunch {
  WorkerLaunch() = default;
  WorkerLaunch(std::string id, std::string secret, int64_t cpu_slot, int thread_count,
               std::string dev = "cpu", std::vector<GpuSlot> held = {})
      : worker_id(std::move(id)),
        token(std::move(secret)),
        slot(cpu_slot),
        threads(thread_count),
        device(std::move(dev)),
        gpus(std::move(held)) {}
  std::string worker_id;
  std::string token;  // the worker's secret for /internal/v1
  int64_t slot = 0;   // its CPU slot (-1: a GPU worker)
  int threads = 1;
  std::string device = "cpu";  // or the GPU type it holds
  std::vector<GpuSlot> gpus;   // the GPUs it holds (on Slurm, only their number counts)
};

// What tells a worker its device: BURST_WORKER_DEVICE (its type), and
// CUDA_VISIBLE_DEVICES: its GPUs by UUID (in PCI order) when `pin` (a
// local worker; on Slurm the GRES plugin sets it), none for a CPU worker,
// so a CPU worker never touches a GPU of the machine.
std::vector<std::pair<std::string, std::string>> WorkerDeviceEnv(const WorkerLaunch& launch, bool pin);

struct WorkerExit {
  std::string worker_id;
  int64_t at_ms = 0;  // when the exit was observed
  std::string how;    // "exit 0", "signal 9", "gone"
};

// Workers started together (Executor::StartGroup).
struct GroupStart {
  std::vector<int64_t> handles;  // Start's handle of each launch, in order
  std::string how;               // how they were started, for the job's events ("" = each alone)
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Starts a worker; returns its pid (or another handle) for display.
  virtual Result<int64_t> Start(const WorkerLaunch& launch) = 0;
  // Starts a gang's workers together: all or none (on failure those
  // started are stopped). This one starts each alone; the Slurm executor
  // asks for one allocation, so the cluster starts none before it has room
  // for all.
  virtual Result<GroupStart> StartGroup(const std::vector<WorkerLaunch>& launches);
  // SIGTERM (a preemption notice), then SIGKILL once `grace_ms` has passed.
  virtual void Stop(const std::string& worker_id, int64_t grace_ms) = 0;
  // Exits observed since the last call.
  virtual std::vector<WorkerExit> Poll() = 0;
  // A worker a previous control plane started (found in the database on
  // restart): watch it too. False when it is already gone.
  virtual bool Adopt(const std::string& worker_id, int64_t pid) = 0;
};

class FakeExecutor : public Executor {
 public:
  explicit FakeExecutor(Clock& clock) : clock_(clock) {}
  Result<int64_t> Start(const WorkerLaunch& launch) override;
  // Records the group's worker ids in `groups`, then starts each.
  Result<GroupStart> StartGroup(const std::vector<WorkerLaunch>& launches) override;
  void Stop(const std::string& worker_id, int64_t grace_ms) override;
  std::vector<WorkerExit> Poll() override;
  bool Adopt(const std::string& worker_id, int64_t pid) override;

  // Test controls. The fields are for a test's own thread; while other
  // threads call the runtime (and so this executor), read through
  // StartedCount() / Started(), which take the executor's lock as its
  // methods do.
  void Exit(const std::string& worker_id, const std::string& how = "exit 0");
  size_t StartedCount() const;
  std::vector<WorkerLaunch> Started() const;
  std::vector<WorkerLaunch> started;
  std::vector<std::vector<std::string>> groups;  // each StartGroup's worker ids
  std::vector<std::string> stopped;
  std::map<std::string, bool> running;
  std::map<std::string, WorkerLaunch> launches;
  bool fail_starts = false;

 private:
  Clock& clock_;
  mutable std::mutex mu_;
  std::vector<WorkerExit> exits_;
  int64_t next_pid_ = 1000;
};

struct LocalExecutorOptions {
  std::string exe;          // the burst binary
  std::string url;          // the control plane, as workers reach it
  std::string log_dir;      // each worker's stdout/stderr: LOG_DIR/<worker>.log
  std::string scratch_dir;  // each worker's scratch space: SCRATCH_DIR/<worker>/
};

class LocalExecutor : public Executor {
 public:
  LocalExecutor(Clock& clock, LocalExecutorOptions options);
  ~LocalExecutor() override;
  Result<int64_t> Start(const WorkerLaunch& launch) override;
  void Stop(const std::string& worker_id, int64_t grace_ms) override;
  std::vector<WorkerExit> Poll() override;
  bool Adopt(const std::string& worker_id, int64_t pid) override;
  // The control plane's URL is known once it has bound its port.
  void set_url(std::string url) { opt_.url = std::move(url); }

 private:
  struct Proc {
    int64_t pid = 0;
    bool child = true;       // false: adopted, watched with kill(pid, 0)
    int64_t kill_at_ms = 0;  // SIGKILL deadline after a Stop (0 = none)
  };
  Clock& clock_;
  LocalExecutorOptions opt_;
  std::map<std::string, Proc> procs_;
};

}  // namespace burst
