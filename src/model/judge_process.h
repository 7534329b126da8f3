// One long-lived reference process for a whole test binary: a Python script
// started once (importing torch and transformers takes seconds; a test
// binary asks it many times), answering one JSON line per request.
//
// The script's side (tests/reference/hf_ref.py `serve`): it reads requests,
// each a JSON array of the arguments one command line would have, from its
// standard input, and writes one line per request to its standard output:
// {"ok": true} or {"ok": false, "error": "..."}. What it prints otherwise
// goes to its standard error, which lands in a file that errors quote.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/json.h"

namespace burst::test_util {

class JudgeProcess {
 public:
  // `command` runs under /bin/sh -c (an interpreter and a script, quoted).
  explicit JudgeProcess(std::string command) : command_(std::move(command)) {}
  ~JudgeProcess() { Stop(); }
  JudgeProcess(const JudgeProcess&) = delete;
  JudgeProcess& operator=(const JudgeProcess&) = delete;

  // Asks for one command; "" when it succeeded, else what went wrong (the
  // reply's error, or how the process died, with the tail of its stderr).
  std::string Call(const std::vector<std::string>& args) {
    if (pid_ <= 0) {
      if (std::string err = Start(); !err.empty()) return err;
    }
    const std::string line = Json(args).dump() + "\n";
    if (std::fwrite(line.data(), 1, line.size(), to_) != line.size() || std::fflush(to_) != 0) {
      return Died("cannot write to the judge");
    }
    std::string reply;
    for (int c = std::fgetc(from_); c != EOF && c != '\n'; c = std::fgetc(from_))
      reply.push_back(static_cast<char>(c));
    if (reply.empty()) return Died("the judge ended without a reply");
    Json r = Json::parse(reply, nullptr, false);
    if (!r.is_object()) return Died("the judge replied " + reply.substr(0, 200));
    if (r.value("ok", false)) return "";
    return r.value("error", std::string("failed")) + "\n" + StderrTail();
  }

 private:
  std::string Start() {
    ::signal(SIGPIPE, SIG_IGN);  // a judge that died is an error, not the test's end
    dir_ = MakeTempDir("burst_judge_");
    const std::string err = (dir_ / "stderr").string();
    // Everything the child needs is made here: between fork and exec it may
    // only make async-signal-safe calls (libtorch's threads exist).
    const std::string line = "exec " + command_;
    const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int in[2], out[2];
    if (err_fd < 0 || ::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      return "cannot start the judge: " + err;
    }
    pid_ = ::fork();
    if (pid_ < 0) return "fork failed";
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err_fd, 2);
      for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
      ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(err_fd);
    ::close(in[0]);
    ::close(out[1]);
    to_ = ::fdopen(in[1], "w");
    from_ = ::fdopen(out[0], "r");
    return "";
  }

  std::string StderrTail() const {
    std::string e =
        dir_.empty() || !std::filesystem::exists(dir_ / "stderr") ? "" : ReadFile(dir_ / "stderr");
    return e.size() > 4000 ? "..." + e.substr(e.size() - 4000) : e;
  }

  std::string Died(const std::string& what) {
    const std::string tail = StderrTail();
    Stop();
    return what + " (" + command_ + ")\n" + tail;
  }

  void Stop() {
    if (to_) std::fclose(to_);  // its end of input: it exits
    if (from_) std::fclose(from_);
    to_ = from_ = nullptr;
    if (pid_ > 0) {
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
    pid_ = -1;
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      dir_.clear();
    }
  }

  std::string command_;
  pid_t pid_ = -1;
  std::FILE* to_ = nullptr;
  std::FILE* from_ = nullptr;
  std::filesystem::path dir_;
};

}  // namespace burst::test_util
