// The command-line transport: sbatch, squeue, scancel.
#include "runtime/slurm_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/ids.h"
#include "core/subprocess.h"

namespace burst {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Status WriteBatchScript(const std::filesystem::path& path, const std::string& script) {
  // 0600 from its creation (a chmod after the write leaves a moment, or a
  // failed write, where others may read the token); O_EXCL and O_NOFOLLOW:
  // a file or link someone else put at the path is refused, not written.
  const auto failed = [&path](const char* what, int err) {
    const std::string detail =
        std::string(what) + " the batch script " + path.string() + ": " + std::strerror(err);
    return Status(Code::kUnavailable, detail, "executor");
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return failed("cannot create", errno);
  size_t off = 0;
  while (off < script.size()) {
    const ssize_t n = ::write(fd, script.data() + off, script.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(path.c_str());
      return failed("cannot write", err);
    }
    off += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return failed("cannot write", err);
  }
  return Status();
}

namespace {

// "a,b,c", as squeue's --name and --jobs take them.
std::string CommaList(const std::vector<std::string>& items) {
  std::string list;
  for (const auto& i : items) list += (list.empty() ? "" : ",") + i;
  return list;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

class SlurmCli : public SlurmClient {
 public:
  explicit SlurmCli(int64_t timeout_ms) : timeout_ms_(timeout_ms) {}

  Result<std::string> Submit(const SlurmJobSpec& spec) override {
    // sbatch reads the script when it submits and Slurm keeps its own copy:
    // the file (it holds the worker's token) lives only for the call.
    namespace fs = std::filesystem;
    const fs::path script =
        fs::temp_directory_path() / ("burst-sbatch-" + spec.name + "-" + NewId("s") + ".sh");
    if (Status s = WriteBatchScript(script, spec.script); !s.ok()) return s;
    std::vector<std::string> a = {"sbatch", "--parsable", "--job-name=" + spec.name,
                                  "--output=" + spec.output, "--open-mode=append",
                                  "--ntasks=" + std::to_string(std::max(1, spec.tasks)),
                                  "--cpus-per-task=" + std::to_string(std::max(1, spec.cpus)),
                                  // Burst requeues the task itself (as preempted); Slurm must not
                                  // start the same worker twice.
                                  "--no-requeue", "--export=NONE"};
    if (spec.signal_before_s > 0) {
      // B: the batch shell, which is the worker; a gang's workers are its steps.
      a.push_back(std::string("--signal=") + (spec.tasks > 1 ? "" : "B:") + "TERM@" +
                  std::to_string(spec.signal_before_s));
    }
    if (!spec.comment.empty()) a.push_back("--comment=" + spec.comment);
    if (spec.mem_per_cpu_mb > 0) a.push_back("--mem-per-cpu=" + std::to_string(spec.mem_per_cpu_mb));
    if (!spec.partition.empty()) a.push_back("--partition=" + spec.partition);
    if (!spec.account.empty()) a.push_back("--account=" + spec.account);
    if (!spec.gres.empty()) a.push_back("--gres=" + spec.gres);
    if (spec.mem_mb > 0) a.push_back("--mem=" + std::to_string(spec.mem_mb));
    a.push_back(script.string());
    auto r = RunCommand(a, timeout_ms_);
    std::error_code ec;
    fs::remove(script, ec);
    if (!r.ok()) return r.status();
    const std::string out = Trim(r.value().out);
    const std::string id = out.substr(0, out.find(';'));  // "ID[;cluster]"
    if (r.value().exit_code != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
      return Status(Code::kUnavailable, Trim(r.value().err + r.value().out), "executor");
    }
    return id;
  }

  std::optional<std::map<std::string, SlurmJobState>> Queue(const std::vector<std::string>& names) override {
    std::map<std::string, SlurmJobState> out;
    if (names.empty()) return out;
    auto rows =
        List({"squeue", "--noheader", "--states=all", "--name=" + CommaList(names), "--format=%i|%j|%T"}, 3);
    if (!rows) return std::nullopt;
    for (const auto& f : *rows) {
      const std::string &id = f[0], &name = f[1], &state = f[2];
      if (id.find_first_not_of("0123456789") != std::string::npos) continue;
      auto cur = out.find(name);
      // A name listed twice (a resubmission): the newest job counts.
      if (cur == out.end() || std::stoll(id) > std::stoll(cur->second.id)) out[name] = {id, state};
    }
    return out;
  }

  Status Stop(const std::string& id, bool term_only, bool batch_shell) override {
    std::vector<std::string> a = {"scancel"};
    if (term_only) {
      a.push_back("--signal=TERM");
      // A pending job has nothing to save (its kill comes after the grace),
      // and scancel kept retrying a signal to one until our 30 s timeout.
      a.push_back("--state=RUNNING");
      if (batch_shell) a.push_back("--full");
    }
    a.push_back(id);
    auto r = RunCommand(a, timeout_ms_);
    if (!r.ok()) return r.status();
    if (r.value().exit_code != 0) {
      return Status(Code::kUnavailable, CommandLine(a) + " failed: " + Trim(r.value().err), "executor");
    }
    return Status();
  }

  bool HasSteps() const override { return true; }

  std::optional<std::map<std::string, std::string>> Steps(const std::vector<std::string>& ids) override {
    std::map<std::string, std::string> out;
    if (ids.empty()) return out;
    auto rows = List({"squeue", "--steps", "--noheader", "--jobs=" + CommaList(ids), "--format=%i|%j"}, 2);
    if (!rows) return std::nullopt;
    for (const auto& f : *rows) {
      // "123.4|name"; the batch step ("123.batch") and extern step are no worker.
      const size_t dot = f[0].find('.');
      if (dot == std::string::npos || f[0].find_first_not_of("0123456789", dot + 1) != std::string::npos)
        continue;
      out[f[1]] = f[0];
    }
    return out;
  }

  std::optional<std::vector<SlurmJobListing>> Mine() override {
    auto rows = List({"squeue", "--me", "--noheader", "--format=%i|%j|%T|%k"}, 4);
    if (!rows) return std::nullopt;
    std::vector<SlurmJobListing> out;
    for (const auto& f : *rows) out.push_back({f[0], f[1], f[2], f[3]});
    return out;
  }

  Result<std::vector<GpuSlot>> Gpus(const std::string& partition) override {
    const std::vector<std::string> a = {"sinfo", "--noheader", "--Node", "--format=%N|%P|%G"};
    auto rows = List(a, 3);
    if (!rows) return Status(Code::kUnavailable, CommandLine(a) + " failed (its error is above)", "gpus");
    std::map<std::string, int64_t> counts;
    std::set<std::string> nodes;  // a node listed for two partitions counts once
    for (const auto& f : *rows) {
      const bool is_default = !f[1].empty() && f[1].back() == '*';
      const std::string part = is_default ? f[1].substr(0, f[1].size() - 1) : f[1];
      if ((partition.empty() ? is_default : part == partition) && nodes.insert(f[0]).second)
        AddGresGpus(f[2], &counts);
    }
    return GpuSlotsOf(counts, "partition " + (partition.empty() ? "(default)" : partition));
  }

  std::string Name() const override { return "sbatch"; }

 private:
  // squeue's lines split at '|' into `fields` fields (the last one keeps
  // any further '|'); nullopt, logged, when squeue failed.
  std::optional<std::vector<std::vector<std::string>>> List(const std::vector<std::string>& a,
                                                            size_t fields) const {
    auto r = RunCommand(a, timeout_ms_);
    if (!r.ok() || r.value().exit_code != 0) {
      std::fprintf(stderr, "burst serve: %s failed (workers' exits are read again next time): %s\n",
                   CommandLine(a).c_str(),
                   r.ok() ? Trim(r.value().err).c_str() : r.status().ToString().c_str());
      return std::nullopt;
    }
    std::vector<std::vector<std::string>> out;
    std::istringstream lines(r.value().out);
    for (std::string line; std::getline(lines, line);) {
      std::vector<std::string> f;
      size_t start = 0;
      while (f.size() + 1 < fields) {
        const size_t bar = line.find('|', start);
        if (bar == std::string::npos) break;
        f.push_back(line.substr(start, bar - start));
        start = bar + 1;
      }
      f.push_back(Trim(line.substr(start)));
      if (f.size() == fields && !f[0].empty()) out.push_back(std::move(f));
    }
    return out;
  }

  int64_t timeout_ms_;
};

}  // namespace

void AddGresGpus(const std::string& gres, std::map<std::string, int64_t>* counts) {
  // Socket bindings "(S:0-1)" may hold commas: dropped first.
  std::string flat;
  int depth = 0;
  for (const char c : gres) {
    depth += c == '(';
    if (depth == 0) flat += c;
    depth -= c == ')' && depth > 0;
  }
  std::istringstream in(flat);
  for (std::string item; std::getline(in, item, ',');) {
    item = Trim(item);
    if (item.rfind("gpu:", 0) != 0) continue;
    const std::string rest = item.substr(4);
    const size_t colon = rest.rfind(':');
    const std::string type = colon == std::string::npos ? "gpu" : rest.substr(0, colon);
    const std::string n = colon == std::string::npos ? rest : rest.substr(colon + 1);
    if (n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != std::string::npos || type.empty())
      continue;
    (*counts)[type] += std::stoll(n);
  }
}

std::vector<GpuSlot> GpuSlotsOf(const std::map<std::string, int64_t>& counts, const std::string& where) {
  std::vector<GpuSlot> out;
  for (const auto& [type, n] : counts)
    for (int64_t i = 0; i < n; ++i) out.push_back(GpuSlot{i, type, type + " on Slurm " + where, ""});
  return out;
}

std::unique_ptr<SlurmClient> NewSlurmCli(int64_t command_timeout_ms) {
  return std::make_unique<SlurmCli>(command_timeout_ms);
}

}  // namespace burst
