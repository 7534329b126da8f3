// Helpers for the end-to-end tests: start the real `burst` binary as a child
// process, capture its stdout/stderr/exit status, interrupt it with a signal
// when a condition on its run folder holds, and check run folders
// (metrics.jsonl, checkpoint manifests) the way a user's script would.
//
// Children get stdin from /dev/null, stdout/stderr in files (so a killed child
// never blocks on a pipe), BURST_MODEL/BURST_DEVICE/BURST_URL/BURST_API_KEY
// unset and BURST_THREADS=1, so the CLI's environment defaults cannot leak
// into a test.
//
// Set BURST_E2E_KEEP=1 to keep the temp folders for inspection.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/fs.h"
#include "core/json.h"

namespace burst::e2e {

// A server that answers before reading a whole body closes the connection
// while the client may still write: the write fails (EPIPE) instead of
// killing the test binary with SIGPIPE, as in any real client.
inline const bool kIgnoreSigpipe = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();

namespace fs = std::filesystem;

inline std::string BurstBinary() { return BURST_BINARY; }
inline fs::path SourceDir() { return fs::path(BURST_SOURCE_DIR); }
inline fs::path TinyTokenizer() { return SourceDir() / "tests/fixtures/tiny-bpe/tokenizer.json"; }
inline fs::path SupportTrain() { return SourceDir() / "examples/support/train.jsonl"; }
inline fs::path SupportValid() { return SourceDir() / "examples/support/valid.jsonl"; }

// ----------------------------------------------------------------------------
// processes

struct ProcResult {
  int exit_code = -1;   // valid when the child exited normally
  int term_signal = 0;  // the signal that ended the child, 0 if it exited
  bool timed_out = false;
  bool signal_sent = false;  // RunUntil: the condition held and the signal went out
  std::string out, err;

  bool ok() const { return term_signal == 0 && !timed_out && exit_code == 0; }
  // For failure messages.
  std::string Describe() const {
    std::ostringstream s;
    if (timed_out) s << "timed out; ";
    if (term_signal)
      s << "killed by signal " << term_signal << "; ";
    else
      s << "exit code " << exit_code << "; ";
    s << "\n--- stdout ---\n" << out.substr(0, 4000) << "\n--- stderr ---\n" << err.substr(0, 4000);
    return s.str();
  }
};

inline std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A started child process. Its output goes to files in a private temp folder.
class Process {
 public:
  explicit Process(std::vector<std::string> args) : args_(std::move(args)) {
    io_dir_ = MakeTempDir("burst-e2e-io");
    std::vector<char*> argv;
    for (auto& a : args_) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string out = (io_dir_ / "stdout").string(), err = (io_dir_ / "stderr").string();
    pid_ = ::fork();
    if (pid_ == 0) {
      int in_fd = ::open("/dev/null", O_RDONLY);
      int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in_fd < 0 || out_fd < 0 || err_fd < 0) ::_exit(126);
      ::dup2(in_fd, 0);
      ::dup2(out_fd, 1);
      ::dup2(err_fd, 2);
      ::unsetenv("BURST_MODEL");
      ::unsetenv("BURST_DEVICE");
      ::unsetenv("BURST_URL");
      ::unsetenv("BURST_API_KEY");
      ::setenv("BURST_THREADS", "1", 1);
      // Default signal dispositions, whatever the test runner set.
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
    std::error_code ec;
    fs::remove_all(io_dir_, ec);
  }

  bool started() const { return pid_ > 0; }
  // What the child has written so far.
  std::string StdoutSoFar() const { return Slurp(io_dir_ / "stdout"); }
  std::string StderrSoFar() const { return Slurp(io_dir_ / "stderr"); }
  pid_t pid() const { return pid_; }
  // True while the child runs (reaps it when it has ended).
  bool Running() {
    if (reaped_ || pid_ <= 0) return false;
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      Record(st);
      return false;
    }
    return true;
  }
  void Signal(int sig) {
    if (!reaped_ && pid_ > 0) ::kill(pid_, sig);
  }
  // Waits for the child to end (SIGKILL after timeout_s) and collects its output.
  ProcResult Wait(double timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (Running()) {
      if (std::chrono::steady_clock::now() > deadline) {
        result_.timed_out = true;
        ::kill(pid_, SIGKILL);
        int st = 0;
        ::waitpid(pid_, &st, 0);
        Record(st);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    result_.out = Slurp(io_dir_ / "stdout");
    result_.err = Slurp(io_dir_ / "stderr");
    return result_;
  }
  ProcResult& result() { return result_; }

 private:
  void Record(int st) {
    reaped_ = true;
    if (WIFEXITED(st)) result_.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) result_.term_signal = WTERMSIG(st);
  }

  std::vector<std::string> args_;
  fs::path io_dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  ProcResult result_;
};

inline constexpr double kDefaultTimeoutS = 300;

// Runs `burst ARGS...` to completion.
inline ProcResult RunBurst(std::vector<std::string> args, double timeout_s = kDefaultTimeoutS) {
  args.insert(args.begin(), BurstBinary());
  Process p(std::move(args));
  return p.Wait(timeout_s);
}

// Runs `burst ARGS...`; as soon as `condition` holds while it still runs,
// sends `sig` and waits for it to end. result.signal_sent says whether the
// condition held in time (the child may also finish first).
inline ProcResult RunBurstUntil(std::vector<std::string> args, const std::function<bool()>& condition,
                                int sig, double timeout_s = kDefaultTimeoutS) {
  args.insert(args.begin(), BurstBinary());
  Process p(std::move(args));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool sent = false;
  while (p.Running() && std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      p.Signal(sig);
      sent = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ProcResult r = p.Wait(timeout_s);
  r.signal_sent = sent;
  return r;
}

// Runs an OpenAI client script (args: the command) against the server at
// base_url (".../v1", in OPENAI_BASE_URL, the key in OPENAI_API_KEY) and
// parses the one JSON object it prints; {} (and a test failure) when it
// fails or prints something else.
inline Json RunOpenAIClient(const std::string& base_url, const std::string& key,
                            const std::vector<std::string>& args, double timeout_s = 240) {
  ::setenv("OPENAI_BASE_URL", base_url.c_str(), 1);
  ::setenv("OPENAI_API_KEY", key.c_str(), 1);
  Process client(args);
  ProcResult r = client.Wait(timeout_s);
  ::unsetenv("OPENAI_BASE_URL");
  ::unsetenv("OPENAI_API_KEY");
  EXPECT_TRUE(r.ok()) << r.Describe();
  Json o = Json::parse(r.out, nullptr, false);
  EXPECT_TRUE(o.is_object()) << r.out;
  return o.is_object() ? o : Json::object();
}

// Polls `pred` every poll_ms until it holds (true) or timeout_s passes (false).
inline bool WaitUntil(const std::function<bool()>& pred, double timeout_s, int poll_ms = 50) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}

// ----------------------------------------------------------------------------
// files

// Removes itself unless BURST_E2E_KEEP is set.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix) : path_(MakeTempDir(prefix)) {}
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (std::getenv("BURST_E2E_KEEP")) {
      std::fprintf(stderr, "[e2e] kept %s\n", path_.string().c_str());
      return;
    }
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline void WriteText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline void WriteJsonFile(const fs::path& path, const Json& j) { WriteText(path, j.dump(2) + "\n"); }

// `text` without leading and trailing whitespace.
inline std::string Trim(const std::string& text) {
  const size_t b = text.find_first_not_of(" \t\r\n");
  return b == std::string::npos ? "" : text.substr(b, text.find_last_not_of(" \t\r\n") - b + 1);
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// The first n lines of src, written to dst.
inline void WriteHead(const fs::path& src, const fs::path& dst, size_t n) {
  std::vector<std::string> lines = Lines(Slurp(src));
  std::string out;
  for (size_t i = 0; i < n && i < lines.size(); ++i) out += lines[i] + "\n";
  WriteText(dst, out);
}

// Flips one byte of a file in place (at `offset`, or the middle).
inline void CorruptByte(const fs::path& path, int64_t offset = -1) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto size = static_cast<int64_t>(fs::file_size(path));
  if (offset < 0) offset = size / 2;
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(offset);
  f.write(&c, 1);
}

inline Json ReadJson(const fs::path& path) { return Json::parse(Slurp(path)); }

// Every line of a JSONL file parsed; a line that does not parse is a failure
// reported through `ok` (and skipped).
inline std::vector<Json> ReadJsonLines(const fs::path& path, bool* ok = nullptr) {
  std::vector<Json> out;
  if (ok) *ok = true;
  for (const auto& line : Lines(Slurp(path))) {
    if (line.empty()) continue;
    try {
      out.push_back(Json::parse(line));
    } catch (...) {
      if (ok) *ok = false;
    }
  }
  return out;
}

// The highest step of a train line in DIR/metrics.jsonl (0 when none). Safe to
// call while a run appends to it: a torn last line is ignored.
inline int64_t MaxTrainStep(const fs::path& run_dir) {
  int64_t best = 0;
  for (const auto& line : Lines(Slurp(run_dir / "metrics.jsonl"))) {
    try {
      Json j = Json::parse(line);
      if (j.value("type", "") == "train") best = std::max(best, j.value("step", int64_t{0}));
    } catch (...) {
    }
  }
  return best;
}

// metrics.jsonl without its timings (wall_s, step_s, exchange_s), one dump
// per line.
inline std::vector<std::string> MetricsWithoutWall(const fs::path& run_dir) {
  std::vector<std::string> out;
  for (Json j : ReadJsonLines(run_dir / "metrics.jsonl")) {
    for (const char* k : {"wall_s", "step_s", "exchange_s"}) j.erase(k);
    out.push_back(j.dump());
  }
  return out;
}

inline fs::path StepDir(const fs::path& run_dir, int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(step));
  return run_dir / "checkpoints" / buf;
}

// Steps with a checkpoints/step-N folder, ascending (not verified).
inline std::vector<int64_t> CheckpointSteps(const fs::path& run_dir) {
  std::vector<int64_t> steps;
  if (!fs::is_directory(run_dir / "checkpoints")) return steps;
  for (const auto& e : fs::directory_iterator(run_dir / "checkpoints")) {
    std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0) steps.push_back(std::stoll(n.substr(5)));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// dir/manifest.json is a Burst manifest of `format`, lists every file in dir
// (except itself), and each listed file's size and sha256 match the disk.
inline ::testing::AssertionResult ManifestMatches(const fs::path& dir, const std::string& format) {
  fs::path mp = dir / "manifest.json";
  if (!fs::exists(mp)) return ::testing::AssertionFailure() << mp << " is missing";
  Json m;
  try {
    m = ReadJson(mp);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << mp << " does not parse: " << e.what();
  }
  if (!m.is_object() || !m.contains("files") || !m["files"].is_object())
    return ::testing::AssertionFailure() << mp << " has no files object: " << m.dump();
  if (!m.contains("version") || !m["version"].is_number_integer())
    return ::testing::AssertionFailure() << mp << " has no integer version";
  if (m.value("format", "") != format)
    return ::testing::AssertionFailure()
           << mp << " format " << m.value("format", "?") << ", expected " << format;
  std::set<std::string> listed;
  for (auto it = m["files"].begin(); it != m["files"].end(); ++it) {
    listed.insert(it.key());
    fs::path p = dir / it.key();
    if (!fs::is_regular_file(p)) return ::testing::AssertionFailure() << p << " is listed but missing";
    if (!it->contains("bytes") || !it->contains("sha256"))
      return ::testing::AssertionFailure() << mp << ": entry " << it.key() << " lacks bytes or sha256";
    if ((*it)["bytes"].get<uint64_t>() != fs::file_size(p))
      return ::testing::AssertionFailure()
             << p << ": " << fs::file_size(p) << " bytes, manifest says " << (*it)["bytes"];
    if ((*it)["sha256"].get<std::string>() != Sha256File(p))
      return ::testing::AssertionFailure() << p << ": sha256 differs from the manifest";
  }
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename() == "manifest.json") continue;
    std::string rel = fs::relative(e.path(), dir).string();
    if (!listed.count(rel)) return ::testing::AssertionFailure() << e.path() << " is not in the manifest";
  }
  return ::testing::AssertionSuccess();
}

inline bool Contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// |a - b| <= rel * max(|a|, |b|).
inline bool NearRel(double a, double b, double rel) {
  return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b));
}

// ----------------------------------------------------------------------------
// ports and foreign processes

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then
// released), for a server that must come back on the same port after a
// restart. 0 when none could be found.
inline int FreeTcpPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// The environment of process `pid` ("K=V\0K=V\0..."), empty when unreadable.
inline std::string ProcEnviron(int64_t pid) {
  if (pid <= 0) return "";
  return Slurp("/proc/" + std::to_string(pid) + "/environ");
}

// True while `pid` is a live (not zombie) process whose environment holds
// `needle` (e.g. "BURST_WORKER_ID=wrk-..."): a test kills only processes it
// started, never a recycled pid.
inline bool ProcessHas(int64_t pid, const std::string& needle) {
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) != 0) return false;
  std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  auto close_paren = stat.rfind(')');
  if (close_paren != std::string::npos && close_paren + 2 < stat.size() && stat[close_paren + 2] == 'Z')
    return false;
  return ProcEnviron(pid).find(needle) != std::string::npos;
}

// ----------------------------------------------------------------------------
// fixtures

// `burst init-model --preset tiny` with the tiny BPE tokenizer into dir.
inline ProcResult InitTinyModel(const fs::path& dir, int seed = 1) {
  return RunBurst({"init-model", "--preset", "tiny", "--tokenizer", TinyTokenizer().string(), "--out",
                   dir.string(), "--seed", std::to_string(seed)});
}

// The support data, first n_train / n_valid lines, into dir/train.jsonl and dir/valid.jsonl.
inline void WriteSupportSubset(const fs::path& dir, size_t n_train, size_t n_valid) {
  WriteHead(SupportTrain(), dir / "train.jsonl", n_train);
  WriteHead(SupportValid(), dir / "valid.jsonl", n_valid);
}

}  // namespace burst::e2e
