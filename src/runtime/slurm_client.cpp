// The command-line transport: sbatch, squeue, scancel.
#include "runtime/slurm_client.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/ids.h"
#include "core/subprocess.h"

namespace burst {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

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
    const fs::path script = fs::temp_directory_path() / ("burst-sbatch-" + spec.name + "-" + NewId("s") + ".sh");
    {
      std::ofstream f(script, std::ios::trunc);
      f << spec.script;
      if (!f) return Status(Code::kUnavailable, "cannot write the batch script " + script.string(), "executor");
    }
    fs::permissions(script, fs::perms::owner_read | fs::perms::owner_write);
    std::vector<std::string> a = {"sbatch",
                                  "--parsable",
                                  "--job-name=" + spec.name,
                                  "--output=" + spec.output,
                                  "--open-mode=append",
                                  "--ntasks=1",
                                  "--cpus-per-task=" + std::to_string(std::max(1, spec.cpus)),
                                  // Burst requeues the task itself (as preempted); Slurm must not
                                  // start the same worker twice.
                                  "--no-requeue",
                                  "--export=NONE"};
    if (spec.signal_before_s > 0) a.push_back("--signal=B:TERM@" + std::to_string(spec.signal_before_s));
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
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ",") + n;
    const std::vector<std::string> a = {"squeue", "--noheader", "--states=all", "--name=" + list,
                                        "--format=%i|%j|%T"};
    auto r = RunCommand(a, timeout_ms_);
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
      if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) continue;
      auto cur = out.find(name);
      // A name listed twice (a resubmission): the newest job counts.
      if (cur == out.end() || std::stoll(id) > std::stoll(cur->second.id)) out[name] = {id, state};
    }
    return out;
  }

  Status Stop(const std::string& id, bool term_only) override {
    std::vector<std::string> a = {"scancel"};
    if (term_only) {
      a.push_back("--signal=TERM");
      a.push_back("--full");
    }
    a.push_back(id);
    auto r = RunCommand(a, timeout_ms_);
    if (!r.ok()) return r.status();
    if (r.value().exit_code != 0) {
      return Status(Code::kUnavailable, CommandLine(a) + " failed: " + Trim(r.value().err), "executor");
    }
    return Status();
  }

  std::string Name() const override { return "sbatch"; }

 private:
  int64_t timeout_ms_;
};

}  // namespace

std::unique_ptr<SlurmClient> NewSlurmCli(int64_t command_timeout_ms) {
  return std::make_unique<SlurmCli>(command_timeout_ms);
}

}  // namespace burst
