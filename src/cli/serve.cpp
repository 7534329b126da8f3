#include "cli/serve.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "api/server.h"
#include "core/status.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

int g_stop_pipe = -1;  // write end of the stop pipe, for the signal handler

struct ServeArgs {
  std::string data = "burst-data";
  std::string listen = "127.0.0.1:8470";
  int threads = 16;
  int64_t max_body_mb = 512;
};

// On first start: the "default" organisation and its first API key, written
// to DATA/admin.key (mode 0600) and printed once.
void EnsureAdminKey(Metadata& md, const fs::path& data) {
  auto orgs = md.ListOrgs();
  if (!orgs.ok()) throw Error(orgs.status());
  if (!orgs.value().empty()) return;
  auto org = md.CreateOrg("default");
  if (!org.ok()) throw Error(org.status());
  auto key = md.CreateApiKey(org.value().id, "admin");
  if (!key.ok()) throw Error(key.status());
  fs::path path = data / "admin.key";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(Code::kUnavailable, "cannot write " + path.string(), path.string());
  std::string line = key.value().secret + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw Error(Code::kUnavailable, "cannot write " + path.string(), path.string());
  std::printf("burst serve: first start; organisation \"default\" (%s), admin API key:\n  %s\n"
              "  (saved to %s, mode 0600; it is not shown again)\n",
              org.value().id.c_str(), key.value().secret.c_str(), path.c_str());
}

int Serve(const ServeArgs& a) {
  ServerOptions opt;
  auto colon = a.listen.rfind(':');
  if (colon == std::string::npos) {
    throw Error(Code::kInvalidArgument, "--listen must be HOST:PORT, got \"" + a.listen + "\"", "listen");
  }
  opt.host = a.listen.substr(0, colon);
  try {
    opt.port = std::stoi(a.listen.substr(colon + 1));
  } catch (const std::exception&) {
    throw Error(Code::kInvalidArgument, "--listen port is not a number: \"" + a.listen + "\"", "listen");
  }
  if (opt.port < 0 || opt.port > 65535) throw Error(Code::kInvalidArgument, "--listen port out of range", "listen");
  if (a.threads < 1) throw Error(Code::kInvalidArgument, "--http-threads must be at least 1", "http-threads");
  if (a.max_body_mb < 1) throw Error(Code::kInvalidArgument, "--max-body-mb must be at least 1", "max-body-mb");
  opt.threads = a.threads;
  opt.max_body_bytes = a.max_body_mb << 20;

  fs::path data = fs::absolute(a.data);
  std::error_code ec;
  fs::create_directories(data, ec);
  if (ec) throw Error(Code::kUnavailable, "cannot create --data " + data.string() + ": " + ec.message(), "data");
  auto md = Metadata::Open((data / "meta.db").string());
  if (!md.ok()) throw Error(md.status());
  auto store = OpenObjectStore("file://" + (data / "store").string());
  if (!store.ok()) throw Error(store.status());
  EnsureAdminKey(*md.value(), data);

  ApiServer server(*md.value(), *store.value(), opt);
  if (Status s = server.Bind(); !s.ok()) throw Error(s);
  std::printf("burst serve: listening on http://%s:%d (data %s)\n", opt.host.c_str(), server.port(),
              data.c_str());
  std::fflush(stdout);
  // SIGINT/SIGTERM stop the server. The handler only writes a byte to a pipe
  // (async-signal-safe, and it works whichever thread the signal lands on:
  // libraries such as OpenBLAS start threads before main); a watcher thread
  // reads it and stops the server.
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw Error(Code::kInternal, "cannot create a pipe");
  g_stop_pipe = pipe_fds[1];
  struct sigaction sa {};
  sa.sa_handler = [](int sig) {
    char c = static_cast<char>(sig);
    [[maybe_unused]] ssize_t n = ::write(g_stop_pipe, &c, 1);
  };
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  std::thread waiter([&] {
    char c = 0;
    while (::read(pipe_fds[0], &c, 1) < 0 && errno == EINTR) {
    }
    server.Stop();
  });
  server.Serve();
  char wake = 0;
  [[maybe_unused]] ssize_t n = ::write(pipe_fds[1], &wake, 1);  // Serve ended by itself
  waiter.join();
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  std::printf("burst serve: stopped\n");
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& app, int* rc) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "Run the control plane: HTTP API, metadata, object store");
  cmd->add_option("--data", args->data, "data folder (SQLite metadata, object store, admin.key)")
      ->capture_default_str()->envname("BURST_DATA");
  cmd->add_option("--listen", args->listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str()->envname("BURST_LISTEN");
  cmd->add_option("--http-threads", args->threads, "request-handling threads")
      ->capture_default_str()->envname("BURST_HTTP_THREADS");
  cmd->add_option("--max-body-mb", args->max_body_mb, "largest request body (uploads), MiB")
      ->capture_default_str()->envname("BURST_MAX_BODY_MB");
  cmd->callback([args, rc] { *rc = Serve(*args); });
}

}  // namespace burst
