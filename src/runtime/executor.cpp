#include "runtime/executor.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace burst {

std::vector<std::pair<std::string, std::string>> NumericsEnv(
    const std::vector<std::pair<std::string, std::string>>& given) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* name : kNumericsEnv) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    bool named = false;
    for (const auto& g : given) named = named || g.first == name;
    if (!named) out.emplace_back(name, value);
  }
  return out;
}

int64_t SystemClock::NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool Clock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, int64_t deadline_ms) {
  // The time left, waited on the steady clock: a wall clock stepped while
  // waiting must not stretch or cut the wait.
  const int64_t left = deadline_ms - NowMs();
  if (left <= 0) return false;
  cv.wait_for(lock, std::chrono::milliseconds(left));
  return NowMs() < deadline_ms;
}

void FakeClock::Advance(int64_t ms) {
  now_ += ms;
  std::vector<Waiter> waiters;
  {
    std::lock_guard<std::mutex> g(waiters_mu_);
    waiters.assign(waiters_.begin(), waiters_.end());
  }
  // Notifying under each waiter's own mutex: a waiter is then either before
  // its deadline check (and sees the new time) or inside its wait (and gets
  // the notification); none can miss both.
  for (const Waiter& w : waiters) {
    std::lock_guard<std::mutex> g(*w.mu);
    w.cv->notify_all();
  }
}

bool FakeClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          int64_t deadline_ms) {
  if (NowMs() >= deadline_ms) return false;
  std::list<Waiter>::iterator me;
  {
    std::lock_guard<std::mutex> g(waiters_mu_);
    me = waiters_.insert(waiters_.end(), Waiter{&cv, lock.mutex()});
  }
  cv.wait(lock);
  {
    std::lock_guard<std::mutex> g(waiters_mu_);
    waiters_.erase(me);
  }
  return NowMs() < deadline_ms;
}

int FakeClock::waiting() {
  std::lock_guard<std::mutex> g(waiters_mu_);
  return static_cast<int>(waiters_.size());
}

Result<GroupStart> Executor::StartGroup(const std::vector<WorkerLaunch>& launches) {
  GroupStart g;
  for (const WorkerLaunch& l : launches) {
    auto h = Start(l);
    if (!h.ok()) {
      // All or none: nothing that started for the group may stay.
      for (size_t i = 0; i < g.handles.size(); ++i) Stop(launches[i].worker_id, 0);
      return h.status();
    }
    g.handles.push_back(h.value());
  }
  return g;
}

// ----------------------------------------------------------------------------
// FakeExecutor

Result<GroupStart> FakeExecutor::StartGroup(const std::vector<WorkerLaunch>& launches) {
  std::vector<std::string> ids;
  for (const WorkerLaunch& l : launches) ids.push_back(l.worker_id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    groups.push_back(ids);
  }
  return Executor::StartGroup(launches);  // Start() for each
}

Result<int64_t> FakeExecutor::Start(const WorkerLaunch& launch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fail_starts) return Status(Code::kUnavailable, "fake executor: start refused", "executor");
  started.push_back(launch);
  launches[launch.worker_id] = launch;
  running[launch.worker_id] = true;
  return next_pid_++;
}

void FakeExecutor::Stop(const std::string& worker_id, int64_t) {
  std::lock_guard<std::mutex> lock(mu_);
  stopped.push_back(worker_id);
}

void FakeExecutor::Exit(const std::string& worker_id, const std::string& how) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!running[worker_id]) return;
  running[worker_id] = false;
  exits_.push_back({worker_id, clock_.NowMs(), how});
}

std::vector<WorkerExit> FakeExecutor::Poll() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(exits_, {});
}

bool FakeExecutor::Adopt(const std::string& worker_id, int64_t) {
  std::lock_guard<std::mutex> lock(mu_);
  return running[worker_id];
}

size_t FakeExecutor::StartedCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started.size();
}

std::vector<WorkerLaunch> FakeExecutor::Started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started;
}

// ----------------------------------------------------------------------------
// LocalExecutor

namespace {
// A process that is not ours to reap: gone, or a zombie nobody has reaped yet.
bool Alive(int64_t pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno != ESRCH;
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return false;
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')');
  return !(paren && paren[1] == ' ' && paren[2] == 'Z');
}
}  // namespace

LocalExecutor::LocalExecutor(Clock& clock, LocalExecutorOptions options)
    : clock_(clock), opt_(std::move(options)) {
  std::filesystem::create_directories(opt_.log_dir);
  std::filesystem::create_directories(opt_.scratch_dir);
}

LocalExecutor::~LocalExecutor() = default;

std::vector<std::pair<std::string, std::string>> WorkerDeviceEnv(const WorkerLaunch& launch, bool pin) {
  std::vector<std::pair<std::string, std::string>> env = {{"BURST_WORKER_DEVICE", launch.device}};
  if (launch.device == "cpu") {
    env.emplace_back("CUDA_VISIBLE_DEVICES", "");
  } else if (pin) {
    std::string ids;
    for (const GpuSlot& g : launch.gpus)
      ids += (ids.empty() ? "" : ",") + (g.uuid.empty() ? std::to_string(g.index) : g.uuid);
    env.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");  // indices as nvidia-smi numbers them
    env.emplace_back("CUDA_VISIBLE_DEVICES", ids);
  }
  return env;
}

Result<int64_t> LocalExecutor::Start(const WorkerLaunch& launch) {
  // Everything is prepared before the spawn: the worker's environment is
  // ours minus the user's API settings, plus its identity and settings.
  // The kNumericsEnv variables (executor.h) are among ours: a local worker
  // computes with this server's kernels as a Slurm one does.
  std::vector<std::string> env;
  const std::vector<std::string> drop = {
      "BURST_API_KEY=",        "BURST_URL=",        "BURST_WORKER_", "BURST_THREADS=",
      "CUDA_VISIBLE_DEVICES=", "CUDA_DEVICE_ORDER="};
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    bool skip = false;
    for (const auto& d : drop) skip = skip || kv.rfind(d, 0) == 0;
    if (!skip) env.push_back(kv);
  }
  const std::string scratch = opt_.scratch_dir + "/" + launch.worker_id;
  env.push_back("BURST_URL=" + opt_.url);
  env.push_back("BURST_WORKER_ID=" + launch.worker_id);
  env.push_back("BURST_WORKER_TOKEN=" + launch.token);
  env.push_back("BURST_WORKER_DIR=" + scratch);
  env.push_back("BURST_THREADS=" + std::to_string(launch.threads));
  for (const auto& [k, v] : WorkerDeviceEnv(launch, true)) env.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& kv : env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::string exe = opt_.exe, sub = "worker";
  std::vector<char*> argv = {exe.data(), sub.data(), nullptr};

  const std::string log = opt_.log_dir + "/" + launch.worker_id + ".log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  // Nothing else of ours (client sockets, the database) leaks into a worker:
  // a socket a worker held open would outlive its connection here.
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group: a Ctrl-C meant for `burst serve` is not a
  // preemption of every worker; serve stops them itself, with grace.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return Status(Code::kUnavailable, "cannot start worker " + exe + ": " + std::strerror(rc), "executor");
  }
  procs_[launch.worker_id] = Proc{pid, true, 0};
  return static_cast<int64_t>(pid);
}

void LocalExecutor::Stop(const std::string& worker_id, int64_t grace_ms) {
  auto it = procs_.find(worker_id);
  if (it == procs_.end()) return;
  ::kill(static_cast<pid_t>(it->second.pid), SIGTERM);
  int64_t deadline = clock_.NowMs() + grace_ms;
  if (it->second.kill_at_ms == 0 || deadline < it->second.kill_at_ms) it->second.kill_at_ms = deadline;
}

std::vector<WorkerExit> LocalExecutor::Poll() {
  std::vector<WorkerExit> out;
  const int64_t now = clock_.NowMs();
  for (auto it = procs_.begin(); it != procs_.end();) {
    Proc& p = it->second;
    std::string how;
    if (p.child) {
      int status = 0;
      pid_t r = ::waitpid(static_cast<pid_t>(p.pid), &status, WNOHANG);
      if (r == static_cast<pid_t>(p.pid)) {
        how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                  : "exit " + std::to_string(WEXITSTATUS(status));
      } else if (r < 0 && errno == ECHILD) {
        how = "gone";
      }
    } else if (!Alive(p.pid)) {
      how = "gone";
    }
    if (!how.empty()) {
      std::error_code ec;  // nothing durable lives in a worker's scratch folder
      std::filesystem::remove_all(opt_.scratch_dir + "/" + it->first, ec);
      out.push_back({it->first, now, how});
      it = procs_.erase(it);
      continue;
    }
    if (p.kill_at_ms != 0 && now >= p.kill_at_ms) {
      ::kill(static_cast<pid_t>(p.pid), SIGKILL);
      p.kill_at_ms = 0;
    }
    ++it;
  }
  return out;
}

bool LocalExecutor::Adopt(const std::string& worker_id, int64_t pid) {
  if (pid <= 0 || !Alive(pid)) return false;
  // A recycled pid would be some other program: check that it is this worker.
  std::string environ_path = "/proc/" + std::to_string(pid) + "/environ";
  FILE* f = std::fopen(environ_path.c_str(), "rb");
  if (!f) return false;
  std::string env;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) env.append(buf, n);
  std::fclose(f);
  if (env.find("BURST_WORKER_ID=" + worker_id + '\0') == std::string::npos) return false;
  procs_[worker_id] = Proc{pid, false, 0};
  return true;
}

}  // namespace burst
