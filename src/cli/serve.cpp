#include "cli/serve.h"

#include <fcntl.h>
#include <malloc.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "api/models.h"
#include "api/server.h"
#include "cli/leader.h"
#include "cli/serve_gpus.h"
#include "cli/serve_shares.h"
#include "core/fs.h"
#include "core/ids.h"
#include "core/status.h"
#include "runtime/executor.h"
#include "runtime/runtime.h"
#include "runtime/slurm_executor.h"
#include "store/s3_store.h"

#ifndef BURST_MODELS_DIR_DEFAULT
#define BURST_MODELS_DIR_DEFAULT ""
#endif

namespace burst {
namespace {

namespace fs = std::filesystem;

int g_stop_pipe = -1;  // write end of the stop pipe, for the signal handler

struct ServeArgs {
  std::string data = "burst-data";
  std::string log_format = "text";
  std::string metrics_token;  // "" = DATA/metrics.token
  std::string listen = "127.0.0.1:8470";
  int threads = 64;
  int max_connections = 1024, max_connections_per_address = 64;
  double head_timeout = 10;
  int64_t min_body_rate_kb = 16;
  int64_t max_body_mb = 512;
  int slots = 0;             // 0: cores / threads-per-slot
  int threads_per_slot = 0;  // 0: 2 when the machine has 2 cores or more
  double scaledown_window = 60;
  double lease_ttl = 10;
  double member_timeout = 120;
  std::string auto_communication = "c10d";
  double price_per_slot_hour = 0.18;
  double price_train_mtok = 0.05, price_prefill_mtok = 0.02, price_sample_mtok = 0.05;
  double price_batch_prefill_mtok = 0.01, price_batch_sample_mtok = 0.025;
  double sample_wait = 60;
  int max_jobs_per_org = 0, max_sampling_per_org = 32, max_deployments_per_org = 0;
  ShareArgs shares;
  GpuArgs gpu;
  std::vector<std::string> model_roots;
  // Where workers run, and how they reach this control plane.
  std::string executor = "local";
  std::string worker_url;  // "" = http://HOST:PORT of --listen
  std::string worker_exe;  // "" = this binary
  std::string slurm_partition, slurm_account, slurm_gres;
  int64_t slurm_mem_mb = 0;
  int64_t slurm_signal_before = 120;        // seconds before the time limit; 0 = none
  std::string slurm_rest, slurm_rest_user;  // slurmrestd instead of sbatch/squeue/scancel
  // Where checkpoints, files and metadata live ("" = in --data).
  std::string store, s3_endpoint, database;
  // NAME or NAME=VALUE: variables Slurm workers get (they run with
  // --export=NONE), besides the kNumericsEnv ones (runtime/executor.h).
  std::vector<std::string> worker_env;
  // Several control planes on one database: the lease's TTL, and the URL
  // this one is reached at (a standby names the active one's).
  double leader_ttl = 5;
  std::string advertise_url;
  // Whether base models reach workers through the store: auto (with the
  // Slurm executor), yes or no.
  std::string ship_models = "auto";
};

// A URL as it may be printed: the password of user:password@ and the value
// of a password= parameter (libpq takes both) replaced.
std::string RedactUrl(std::string url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const size_t at = url.find('@', scheme + 3), slash = url.find('/', scheme + 3);
  const size_t colon = url.find(':', scheme + 3);
  if (at != std::string::npos && (slash == std::string::npos || at < slash) && colon < at) {
    url = url.substr(0, colon + 1) + "****" + url.substr(at);
  }
  for (size_t p = url.find("password="); p != std::string::npos; p = url.find("password=", p + 1)) {
    if (p > 0 && url[p - 1] != '?' && url[p - 1] != '&') continue;
    const size_t end = url.find('&', p);
    url = url.substr(0, p + 9) + "****" + (end == std::string::npos ? "" : url.substr(end));
  }
  return url;
}

// The store URL workers are given: s3:// spelled out with its endpoint and
// region (a worker on another node opens the same bucket whatever its own
// environment says); file:// as given (a folder every worker node must see at
// that path).
std::string ResolveStoreUrl(const ServeArgs& a, const fs::path& data) {
  if (a.store.empty()) {
    if (!a.s3_endpoint.empty())
      throw Error(Code::kInvalidArgument, "--s3-endpoint needs --store s3://...", "s3-endpoint");
    return "file://" + (data / "store").string();
  }
  if (a.store.rfind("s3://", 0) == 0) {
    std::string url = a.store;
    if (!a.s3_endpoint.empty()) {
      if (url.find("endpoint=") != std::string::npos) {
        throw Error(Code::kInvalidArgument,
                    "give the S3 endpoint once: in --store's endpoint= or in --s3-endpoint", "s3-endpoint");
      }
      url += (url.find('?') == std::string::npos ? "?endpoint=" : "&endpoint=") + a.s3_endpoint;
    }
    auto config = ParseS3Url(url);
    if (!config.ok()) throw Error(config.status());
    return S3StoreUrl(config.value());
  }
  if (a.store.rfind("file://", 0) == 0) return a.store;
  throw Error(Code::kInvalidArgument,
              "--store must be file:///folder or s3://bucket/prefix, got \"" + RedactUrl(a.store) + "\"",
              "store");
}

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
  std::printf(
      "burst serve: first start; organisation \"default\" (%s), admin API key:\n  %s\n"
      "  (saved to %s, mode 0600; it is not shown again)\n",
      org.value().id.c_str(), key.value().secret.c_str(), path.c_str());
}

// The token GET /metrics answers: DATA/metrics.token, written (mode 0600)
// at first start and read afterwards, so a scraper's credentials file stays
// valid across restarts.
std::string MetricsToken(const fs::path& data) {
  const fs::path path = data / "metrics.token";
  if (fs::exists(path)) {
    std::string token = ReadFile(path);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    if (token.empty())
      throw Error(Code::kInvalidArgument, path.string() + " is empty; delete it to get a new token");
    return token;
  }
  const std::string token = NewSecret("burst-metrics");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(Code::kUnavailable, "cannot write " + path.string(), path.string());
  const std::string line = token + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw Error(Code::kUnavailable, "cannot write " + path.string(), path.string());
  return token;
}

int Serve(const ServeArgs& a) {
  // Request bodies and their parsed JSON come and go in tens of MiB: large
  // blocks are mapped and unmapped (glibc's threshold would otherwise grow
  // to keep them), freed memory is trimmed, and a few arenas serve every
  // request thread, so a burst of big requests does not stay resident.
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
  mallopt(M_ARENA_MAX, 2);
  ServerOptions opt;
  opt.log_format = a.log_format;
  const std::string& adv = a.advertise_url;
  if (!adv.empty() && adv.rfind("http://", 0) != 0 && adv.rfind("https://", 0) != 0) {
    throw Error(Code::kInvalidArgument,
                "--advertise-url must start with http:// or https://, got \"" + adv + "\"", "advertise-url");
  }
  opt.advertise_url = a.advertise_url;
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
  if (opt.port < 0 || opt.port > 65535)
    throw Error(Code::kInvalidArgument, "--listen port out of range", "listen");
  if (a.threads < 1) throw Error(Code::kInvalidArgument, "--http-threads must be at least 1", "http-threads");
  if (a.max_connections < 1)
    throw Error(Code::kInvalidArgument, "--max-connections must be at least 1", "max-connections");
  if (a.max_connections_per_address < 1) {
    throw Error(Code::kInvalidArgument, "--max-connections-per-address must be at least 1",
                "max-connections-per-address");
  }
  if (a.head_timeout <= 0) throw Error(Code::kInvalidArgument, "--head-timeout must be > 0", "head-timeout");
  if (a.min_body_rate_kb < 0)
    throw Error(Code::kInvalidArgument, "--min-body-rate-kb must be >= 0", "min-body-rate-kb");
  opt.http.max_connections = a.max_connections;
  opt.http.max_connections_per_address = a.max_connections_per_address;
  opt.http.head_timeout_ms = static_cast<int64_t>(a.head_timeout * 1000);
  opt.http.min_body_bytes_per_s = a.min_body_rate_kb << 10;
  if (a.max_body_mb < 1)
    throw Error(Code::kInvalidArgument, "--max-body-mb must be at least 1", "max-body-mb");
  opt.max_body_bytes = a.max_body_mb << 20;
  if (a.sample_wait < 0) throw Error(Code::kInvalidArgument, "--sample-wait must be >= 0", "sample-wait");
  opt.sample_wait_ms = static_cast<int64_t>(a.sample_wait * 1000);
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  RuntimeOptions ro;
  ro.threads_per_slot = a.threads_per_slot > 0 ? a.threads_per_slot : std::min(2, cores);
  ro.slots = a.slots > 0 ? a.slots : std::max(1, cores / ro.threads_per_slot);
  if (a.slots < 0) throw Error(Code::kInvalidArgument, "--slots must be at least 1", "slots");
  if (a.threads_per_slot < 0)
    throw Error(Code::kInvalidArgument, "--threads-per-slot must be at least 1", "threads-per-slot");
  if (a.scaledown_window < 0)
    throw Error(Code::kInvalidArgument, "--scaledown-window must be >= 0", "scaledown-window");
  if (a.lease_ttl < 1)
    throw Error(Code::kInvalidArgument, "--lease-ttl must be at least 1 second", "lease-ttl");
  if (a.price_per_slot_hour < 0)
    throw Error(Code::kInvalidArgument, "--price-per-slot-hour must be >= 0", "price-per-slot-hour");
  ro.scaledown_window_ms = static_cast<int64_t>(a.scaledown_window * 1000);
  ro.lease_ttl_ms = static_cast<int64_t>(a.lease_ttl * 1000);
  if (a.member_timeout < 1) {
    throw Error(Code::kInvalidArgument, "--member-timeout must be at least 1 second", "member-timeout");
  }
  ro.member_timeout_ms = static_cast<int64_t>(a.member_timeout * 1000);
  ro.auto_communication = a.auto_communication;
  ro.price_per_slot_second = a.price_per_slot_hour / 3600.0;
  ro.max_active_jobs_per_org = std::max(0, a.max_jobs_per_org);
  ro.max_sampling_calls_per_org = std::max(0, a.max_sampling_per_org);
  ro.max_deployments_per_org = std::max(0, a.max_deployments_per_org);
  ro.price_train_per_mtok = a.price_train_mtok;
  ro.price_prefill_per_mtok = a.price_prefill_mtok;
  ro.price_sample_per_mtok = a.price_sample_mtok;
  ro.price_batch_prefill_per_mtok = a.price_batch_prefill_mtok;
  ro.price_batch_sample_per_mtok = a.price_batch_sample_mtok;
  // API requests: the pool, each organisation's share of it, and the rest
  // of the shares. The workers' protocol has a pool of its own (a lease
  // long poll and a heartbeat or two per worker). Slow clients hold no
  // thread: the event loop reads requests.
  opt.http.max_threads = a.threads;
  opt.http.max_internal_threads = 16 + 4 * ro.slots;
  ApplyShares(a.shares, opt, ro);

  fs::path data = fs::absolute(a.data);
  // The data folder holds every organisation's files, checkpoints and
  // records: its user's only, and tightened if an earlier version left it
  // (or the admin key) looser.
  if (Status s = Try([&] {
        CreateDirectories(data, 0700);
        RestrictMode(data, 0700);
        RestrictMode(data / "admin.key", 0600);
      });
      !s.ok()) {
    throw Error(Status(s.code(), "--data " + data.string() + ": " + s.message(), "data"));
  }
  opt.data_dir = data;
  // Uploads are spooled here while they are checked (unlinked at once).
  if (Status s = Try([&] { CreateDirectories(data / "tmp", 0700); }); !s.ok()) {
    throw Error(Status(s.code(), "--data " + data.string() + ": " + s.message(), "data"));
  }
  opt.http.spool_dir = (data / "tmp").string();
  opt.metrics_token = a.metrics_token.empty() ? MetricsToken(data) : a.metrics_token;
  const std::string database = a.database.empty() ? (data / "meta.db").string() : a.database;
  auto md = Metadata::Open(database);
  if (!md.ok()) throw Error(md.status());
  ro.store_url = ResolveStoreUrl(a, data);
  auto store = OpenObjectStore(ro.store_url);
  if (!store.ok()) throw Error(store.status());
  if (a.model_roots.empty()) {
    opt.model_roots.push_back(data / "models");
    if (const char* env = std::getenv("BURST_MODELS_DIR")) opt.model_roots.emplace_back(env);
    if (std::string(BURST_MODELS_DIR_DEFAULT).size()) opt.model_roots.emplace_back(BURST_MODELS_DIR_DEFAULT);
  } else {
    for (const auto& r : a.model_roots) opt.model_roots.push_back(fs::absolute(r));
  }

  SystemClock clock;
  const std::string exe = a.worker_exe.empty() ? fs::read_symlink("/proc/self/exe").string() : a.worker_exe;
  std::unique_ptr<LocalExecutor> local;
  std::unique_ptr<SlurmExecutor> slurm;
  if (a.executor == "local") {
    LocalExecutorOptions lo;
    lo.exe = exe;
    lo.log_dir = (data / "workers" / "logs").string();
    lo.scratch_dir = (data / "workers" / "scratch").string();
    local = std::make_unique<LocalExecutor>(clock, lo);
  } else if (a.executor == "slurm") {
    SlurmExecutorOptions so;
    so.exe = exe;
    so.log_dir = (data / "workers" / "logs").string();
    so.scratch_dir = (data / "workers" / "scratch").string();
    so.partition = a.slurm_partition;
    so.account = a.slurm_account;
    so.gres = a.slurm_gres;
    so.mem_mb = a.slurm_mem_mb;
    if (a.slurm_signal_before < 0) {
      throw Error(Code::kInvalidArgument, "--slurm-signal-before must be >= 0", "slurm-signal-before");
    }
    so.signal_before_s = a.slurm_signal_before;
    if (!a.slurm_rest.empty()) {
      if (a.slurm_rest.rfind("http://", 0) != 0 && a.slurm_rest.rfind("https://", 0) != 0 &&
          a.slurm_rest.rfind("unix:/", 0) != 0) {
        throw Error(
            Code::kInvalidArgument,
            "--slurm-rest must be http://HOST:PORT, https://HOST:PORT or unix:/path/to/socket, got \"" +
                a.slurm_rest + "\"",
            "slurm-rest");
      }
      so.rest_url = a.slurm_rest;
      // A JWT as Slurm's own tools take it (`scontrol token` prints SLURM_JWT=...).
      if (const char* jwt = std::getenv("SLURM_JWT"); jwt != nullptr) so.rest_token = jwt;
      so.rest_user = a.slurm_rest_user;
      if (so.rest_user.empty()) {
        const passwd* pw = ::getpwuid(::getuid());
        so.rest_user = pw != nullptr ? pw->pw_name : std::to_string(::getuid());
      }
      if (so.rest_token.empty() && a.slurm_rest.rfind("unix:", 0) != 0) {
        throw Error(Code::kInvalidArgument,
                    "--slurm-rest " + a.slurm_rest + " needs a JWT in SLURM_JWT (scontrol token username=" +
                        so.rest_user + "); only a unix socket authenticates without one",
                    "slurm-rest");
      }
    }
    for (const std::string& item : a.worker_env) {
      const size_t eq = item.find('=');
      const std::string name = item.substr(0, eq);
      if (name.empty() ||
          name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
              std::string::npos ||
          std::isdigit(static_cast<unsigned char>(name[0]))) {
        throw Error(Code::kInvalidArgument, "--worker-env \"" + item + "\": NAME must be a variable name",
                    "worker-env");
      }
      if (eq != std::string::npos) {
        so.env.emplace_back(name, item.substr(eq + 1));
      } else if (const char* v = std::getenv(name.c_str())) {
        so.env.emplace_back(name, v);
      }
    }
    // Jobs run with --export=NONE: an s3:// store's credentials go in the script.
    if (ro.store_url.rfind("s3://", 0) == 0) {
      for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}) {
        if (const char* v = std::getenv(name); v != nullptr && *v != '\0') so.env.emplace_back(name, v);
      }
    }
    if (a.slurm_mem_mb < 0)
      throw Error(Code::kInvalidArgument, "--slurm-mem-mb must be >= 0", "slurm-mem-mb");
    slurm = std::make_unique<SlurmExecutor>(clock, so);
  } else {
    throw Error(Code::kInvalidArgument, "--executor must be local or slurm, got \"" + a.executor + "\"",
                "executor");
  }
  if (a.ship_models != "auto" && a.ship_models != "yes" && a.ship_models != "no") {
    throw Error(Code::kInvalidArgument,
                "--ship-models must be auto, yes or no, got \"" + a.ship_models + "\"", "ship-models");
  }
  opt.ship_models = a.ship_models == "yes" || (a.ship_models == "auto" && slurm);
  // The GPUs workers may hold: this machine's (nvidia-smi), or the Slurm
  // partition's GPU GRES.
  auto gpus = a.gpu.gpus == "none" ? Result<std::vector<GpuSlot>>(std::vector<GpuSlot>{})
              : slurm              ? slurm->Gpus()
                                   : DetectGpus();
  if (!gpus.ok()) {
    throw Error(Code::kUnavailable,
                "--gpus " + a.gpu.gpus + ": cannot list the GPUs: " + gpus.status().message() +
                    " (--gpus none starts without them)",
                "gpus");
  }
  ApplyGpus(a.gpu, gpus.value(), slurm != nullptr, ro);
  // Sampling calls and loops run where their model's catalog entry says.
  ro.call_devices = [roots = opt.model_roots, pool = PoolOf(ro.gpus, ro.slots, ro.threads_per_slot)](
                        const std::string& base_model, const std::string& model_name) {
    return CallDevicesFor(base_model, model_name, roots, pool);
  };
  Executor& executor = local ? static_cast<Executor&>(*local) : *slurm;
  Runtime runtime(*md.value(), executor, clock, ro);
  ApiServer server(*md.value(), *store.value(), runtime, opt);
  if (Status s = server.Bind(); !s.ok()) throw Error(s);
  const std::string host = opt.host == "0.0.0.0" || opt.host.empty() ? "127.0.0.1" : opt.host;
  const std::string url =
      a.worker_url.empty() ? "http://" + host + ":" + std::to_string(server.port()) : a.worker_url;
  if (local) local->set_url(url);
  if (slurm) slurm->set_url(url);
  // SIGINT/SIGTERM stop the server. The handler only writes a byte to a pipe
  // (async-signal-safe, and it works whichever thread the signal lands on:
  // libraries such as OpenBLAS start threads before main); a watcher thread
  // reads it and stops the server. Installed before the first line a
  // supervisor (or a test) waits for: a signal right after "listening on"
  // stops the server cleanly, once the watcher starts below.
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
  std::printf("burst serve: listening on http://%s:%d (data %s)\n", opt.host.c_str(), server.port(),
              data.c_str());
  std::printf("burst serve: dashboard at http://%s:%d/ (sign in with an API key)\n", host.c_str(),
              server.port());
  // Leadership: of the control planes sharing this database, the lease's
  // holder runs the work; the others stand by and take over when it lapses.
  // A restart here (same host and data folder) is the same holder and
  // leads again at once.
  if (a.leader_ttl < 1)
    throw Error(Code::kInvalidArgument, "--leader-ttl must be at least 1 second", "leader-ttl");
  char hostname[256] = {};
  ::gethostname(hostname, sizeof(hostname) - 1);
  const std::string self_url = server.url();
  LeaderElector::Callbacks roles;
  roles.on_active = [&](int64_t term) -> Status {
    if (Status s = Try([&] { EnsureAdminKey(*md.value(), data); }); !s.ok()) return s;
    if (Status s = runtime.Recover(); !s.ok()) return s;
    auto loops = server.RecoverLoops();
    if (!loops.ok()) return loops.status();
    if (loops.value() > 0)
      std::printf("burst serve: took over %d training loop run%s\n", loops.value(),
                  loops.value() == 1 ? "" : "s");
    runtime.StartTicker();
    server.SetRole(true, self_url);
    std::printf("burst serve: active (leader term %lld)\n", static_cast<long long>(term));
    std::fflush(stdout);
    return Status();
  };
  roles.on_standby = [&](const std::string& leader) {
    server.SetRole(false, leader);
    std::printf("burst serve: standby; the active control plane is at %s\n", leader.c_str());
    std::fflush(stdout);
  };
  roles.on_lost = [&](const std::string& why) {
    // Another control plane may be running this work already: stop at once.
    // Workers live on and follow the new leader.
    std::fprintf(stderr, "burst serve: lost leadership (%s); exiting\n", why.c_str());
    std::fflush(stderr);
    std::_Exit(75);
  };
  LeaderElector elector(*md.value(), std::string(hostname) + ":" + data.string(), self_url,
                        static_cast<int64_t>(a.leader_ttl * 1000), roles);
  server.SetRole(false, "");
  if (Status s = elector.Start(); !s.ok()) throw Error(s);
  std::printf("burst serve: %d slot%s x %d thread%s, scaledown window %.0f s, lease TTL %.0f s\n", ro.slots,
              ro.slots == 1 ? "" : "s", ro.threads_per_slot, ro.threads_per_slot == 1 ? "" : "s",
              a.scaledown_window, a.lease_ttl);
  if (!ro.gpus.empty()) {
    std::string priced;
    for (const auto& [type, per_s] : ro.price_per_gpu_second) {
      char price[32];
      std::snprintf(price, sizeof price, "%.2f", per_s * 3600);
      priced += (priced.empty() ? "" : ", ") + type + " " + price + "/GPU-hour";
    }
    std::printf("burst serve: GPUs %s (%s)\n", DescribeGpus(ro.gpus).c_str(), priced.c_str());
  }
  std::printf("burst serve: store %s, database %s\n", ro.store_url.c_str(), RedactUrl(database).c_str());
  // What the workers' kernels follow besides their own CPU (executor.h): an
  // operator comparing bytes across machines looks here first.
  std::vector<std::pair<std::string, std::string>> named;  // --worker-env's own choice wins on Slurm
  if (slurm) {
    for (const std::string& item : a.worker_env) named.emplace_back(item.substr(0, item.find('=')), "");
  }
  if (const auto numerics = NumericsEnv(named); !numerics.empty()) {
    std::string given;
    for (const auto& [name, value] : numerics) given += (given.empty() ? "" : " ") + name + "=" + value;
    std::printf("burst serve: workers compute with %s from this server's environment\n", given.c_str());
  }
  std::printf(
      "burst serve: workers run %s, reaching this server at %s; base models %s\n",
      slurm ? ("as Slurm jobs" + (a.slurm_partition.empty() ? "" : " on partition " + a.slurm_partition) +
               " (through " + slurm->Transport() + "; " + slurm->Gangs() + ")")
                  .c_str()
            : "as local processes",
      url.c_str(), opt.ship_models ? "go to them through the store" : "are read from this machine's folders");
  std::fflush(stdout);
  // The catalog's models go to the store before the first job needs them.
  std::atomic<bool> shipping_stop{false};
  std::thread shipper([&] { server.ShipModels(shipping_stop); });
  std::thread waiter([&] {
    char c = 0;
    while (::read(pipe_fds[0], &c, 1) < 0 && errno == EINTR) {
    }
    // Workers are told to leave first (a preemption: running tasks write a
    // state checkpoint and report it) while the API still answers them; then
    // the lease goes, so a standby takes over at once.
    if (elector.active()) runtime.Shutdown(/*stop_workers=*/true, ro.stop_grace_ms + 5000);
    elector.Stop();
    server.Stop();
  });
  server.Serve();
  char wake = 0;
  [[maybe_unused]] ssize_t n = ::write(pipe_fds[1], &wake, 1);  // Serve ended by itself
  waiter.join();
  shipping_stop = true;
  shipper.join();
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
      ->capture_default_str()
      ->envname("BURST_DATA");
  cmd->add_option("--listen", args->listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str()
      ->envname("BURST_LISTEN");
  cmd->add_option(
         "--log-format", args->log_format,
         "access log lines on stdout: text, or json (one object a line: time, method, route, path, status, "
         "duration_ms, org, request_id, remote)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}))
      ->envname("BURST_LOG_FORMAT");
  cmd->add_option("--metrics-token", args->metrics_token,
                  "bearer token GET /metrics answers (default: DATA/metrics.token, made at first start)")
      ->envname("BURST_METRICS_TOKEN");
  cmd->add_option("--http-threads", args->threads,
                  "most threads running API requests at once (the workers' protocol has its own)")
      ->capture_default_str()
      ->envname("BURST_HTTP_THREADS");
  cmd->add_option("--max-connections", args->max_connections, "open connections; more are refused with 503")
      ->capture_default_str()
      ->envname("BURST_MAX_CONNECTIONS");
  cmd->add_option("--max-connections-per-address", args->max_connections_per_address,
                  "open connections from one client address; more are refused with 503")
      ->capture_default_str()
      ->envname("BURST_MAX_CONNECTIONS_PER_ADDRESS");
  cmd->add_option("--head-timeout", args->head_timeout,
                  "seconds a request's headers may take to arrive (then 408 and the connection closes)")
      ->capture_default_str()
      ->envname("BURST_HEAD_TIMEOUT");
  cmd->add_option("--min-body-rate-kb", args->min_body_rate_kb,
                  "KiB/s a request body must average after its first 5 s (slower: 408, closed)")
      ->capture_default_str()
      ->envname("BURST_MIN_BODY_RATE_KB");
  cmd->add_option("--max-body-mb", args->max_body_mb, "largest request body (uploads), MiB")
      ->capture_default_str()
      ->envname("BURST_MAX_BODY_MB");
  cmd->add_option("--slots", args->slots, "worker slots (default: cores / threads-per-slot)")
      ->envname("BURST_SLOTS");
  cmd->add_option("--threads-per-slot", args->threads_per_slot,
                  "CPU threads per worker slot (default: 2, or 1 on one core)")
      ->envname("BURST_THREADS_PER_SLOT");
  cmd->add_option("--scaledown-window", args->scaledown_window,
                  "seconds an idle worker stays warm before it exits")
      ->capture_default_str()
      ->envname("BURST_SCALEDOWN_WINDOW");
  cmd->add_option("--lease-ttl", args->lease_ttl, "seconds without a heartbeat before a task is requeued")
      ->capture_default_str()
      ->envname("BURST_LEASE_TTL");
  cmd->add_option("--member-timeout", args->member_timeout,
                  "a job on many workers: seconds a worker waits for the others (rendezvous, each exchange)")
      ->capture_default_str()
      ->envname("BURST_MEMBER_TIMEOUT");
  cmd->add_option("--auto-communication", args->auto_communication,
                  "what a job's \"communication\": \"auto\" means: c10d (workers reach each other) or store")
      ->capture_default_str()
      ->check(CLI::IsMember({"c10d", "store"}))
      ->envname("BURST_AUTO_COMMUNICATION");
  cmd->add_option("--price-per-slot-hour", args->price_per_slot_hour,
                  "price of one slot-hour, for the usage ledger")
      ->capture_default_str()
      ->envname("BURST_PRICE_PER_SLOT_HOUR");
  cmd->add_option("--price-train-per-mtok", args->price_train_mtok,
                  "serverless scope: price per million trained tokens")
      ->capture_default_str()
      ->envname("BURST_PRICE_TRAIN_PER_MTOK");
  cmd->add_option("--price-prefill-per-mtok", args->price_prefill_mtok,
                  "serverless scope: price per million prompt (prefill) and evaluated tokens")
      ->capture_default_str()
      ->envname("BURST_PRICE_PREFILL_PER_MTOK");
  cmd->add_option("--price-sample-per-mtok", args->price_sample_mtok,
                  "serverless scope: price per million sampled tokens")
      ->capture_default_str()
      ->envname("BURST_PRICE_SAMPLE_PER_MTOK");
  cmd->add_option("--price-batch-prefill-per-mtok", args->price_batch_prefill_mtok,
                  "serverless scope: price per million prompt tokens of a batch (/v1/batches)")
      ->capture_default_str()
      ->envname("BURST_PRICE_BATCH_PREFILL_PER_MTOK");
  cmd->add_option("--price-batch-sample-per-mtok", args->price_batch_sample_mtok,
                  "serverless scope: price per million sampled tokens of a batch (/v1/batches)")
      ->capture_default_str()
      ->envname("BURST_PRICE_BATCH_SAMPLE_PER_MTOK");
  cmd->add_option("--sample-wait", args->sample_wait,
                  "seconds a sampling call waits for a free worker before 429 capacity")
      ->capture_default_str()
      ->envname("BURST_SAMPLE_WAIT");
  cmd->add_option("--org-max-jobs", args->max_jobs_per_org,
                  "jobs an organisation may have queued or running at once (0: no cap; over it: 429 org_cap)")
      ->capture_default_str()
      ->envname("BURST_ORG_MAX_JOBS");
  AddShareOptions(*cmd, &args->shares);
  AddGpuOptions(*cmd, &args->gpu);
  cmd->add_option("--org-max-sampling", args->max_sampling_per_org,
                  "sampling calls an organisation may have in flight (0: no cap; over it: 429 org_cap)")
      ->capture_default_str()
      ->envname("BURST_ORG_MAX_SAMPLING");
  cmd->add_option("--org-max-deployments", args->max_deployments_per_org,
                  "live deployments an organisation may have (0: no cap; over it: 429 org_cap)")
      ->capture_default_str()
      ->envname("BURST_ORG_MAX_DEPLOYMENTS");
  cmd->add_option(
         "--model-root", args->model_roots,
         "folder whose model folders jobs may name (repeatable; default: DATA/models and the shipped models)")
      ->envname("BURST_MODEL_ROOT");
  cmd->add_option("--executor", args->executor,
                  "where workers run: local (processes here) or slurm (one sbatch job each)")
      ->capture_default_str()
      ->envname("BURST_EXECUTOR");
  cmd->add_option(
         "--worker-url", args->worker_url,
         "URL workers reach this server at (default: http://HOST:PORT of --listen; set it for cluster nodes)")
      ->envname("BURST_SERVE_WORKER_URL");
  cmd->add_option("--worker-exe", args->worker_exe,
                  "the burst binary as workers' machines see it (default: this one)")
      ->envname("BURST_SERVE_WORKER_EXE");
  cmd->add_option("--slurm-partition", args->slurm_partition,
                  "Slurm partition for workers (default: the cluster's)")
      ->envname("BURST_SLURM_PARTITION");
  cmd->add_option("--slurm-account", args->slurm_account, "Slurm account workers are charged to")
      ->envname("BURST_SLURM_ACCOUNT");
  cmd->add_option("--slurm-gres", args->slurm_gres, "generic resources per worker, e.g. gpu:1")
      ->envname("BURST_SLURM_GRES");
  cmd->add_option("--slurm-mem-mb", args->slurm_mem_mb, "memory per worker in MB (0: the cluster's default)")
      ->capture_default_str()
      ->envname("BURST_SLURM_MEM_MB");
  cmd->add_option(
         "--slurm-signal-before", args->slurm_signal_before,
         "seconds before a worker's time limit that Slurm sends it SIGTERM (--signal=B:TERM@N), so it "
         "writes a state checkpoint and the task moves on as preempted (0: none; keep it well under the "
         "partition's time limit)")
      ->capture_default_str()
      ->envname("BURST_SLURM_SIGNAL_BEFORE");
  cmd->add_option("--slurm-rest", args->slurm_rest,
                  "submit, list and cancel workers through slurmrestd at http(s)://HOST:PORT or unix:/path "
                  "(a JWT in SLURM_JWT; default: sbatch, squeue and scancel)")
      ->envname("BURST_SLURM_REST");
  cmd->add_option("--slurm-rest-user", args->slurm_rest_user,
                  "the user slurmrestd's JWT is for (default: the user running burst serve)")
      ->envname("BURST_SLURM_REST_USER");
  std::string numerics;
  for (const char* name : kNumericsEnv) numerics += std::string(numerics.empty() ? "" : ", ") + name;
  cmd->add_option(
         "--worker-env", args->worker_env,
         "NAME (this server's value) or NAME=VALUE, repeatable: a variable Slurm workers get (they run with "
         "--export=NONE; local workers inherit this server's environment). Those that choose numeric "
         "kernels go to every worker from this server's environment without it, so that a job computes "
         "the same bytes on any worker (" +
             numerics + "); NAME=VALUE here overrides")
      ->envname("BURST_WORKER_ENV");
  cmd->add_option(
         "--leader-ttl", args->leader_ttl,
         "seconds the active control plane's lease lasts without renewal; a standby on the same database "
         "takes over after it")
      ->capture_default_str()
      ->envname("BURST_LEADER_TTL");
  cmd->add_option(
         "--advertise-url", args->advertise_url,
         "URL clients reach this control plane at: a standby names it, and the download links it hands out "
         "start with it (default: http://HOST:PORT of --listen, 127.0.0.1 for 0.0.0.0; set it when clients "
         "come through another name or a proxy)")
      ->envname("BURST_ADVERTISE_URL");
  cmd->add_option(
         "--store", args->store,
         "where files and checkpoints live: file:///folder (every worker node must see it) or "
         "s3://bucket/prefix (credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; "
         "default: DATA/store)")
      ->envname("BURST_STORE");
  cmd->add_option(
         "--s3-endpoint", args->s3_endpoint,
         "S3 service URL for an s3:// store, e.g. https://s3.example:9000 (default: AWS's, for AWS_REGION)")
      ->envname("BURST_S3_ENDPOINT");
  cmd->add_option(
         "--database", args->database,
         "metadata database: sqlite:///path/meta.db or postgresql://user@host/db (libpq's PG* variables "
         "apply; default: DATA/meta.db)")
      ->envname("BURST_DATABASE");
  cmd->add_option(
         "--ship-models", args->ship_models,
         "base models reach workers through the store (yes), or workers read this machine's model folders "
         "(no); auto: yes with --executor slurm")
      ->capture_default_str()
      ->envname("BURST_SHIP_MODELS");
  cmd->callback([args, rc] { *rc = Serve(*args); });
}

}  // namespace burst
