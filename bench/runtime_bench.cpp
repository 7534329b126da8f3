// burst_runtime_bench: the serverless runtime's control plane, measured
// in-process (docs/bench.md, "Serverless runtime").
//
//   burst_runtime_bench submit   [--jobs 5000] [--clients 8] [--warmup 100]
//                                [--reference-jobs 5000] [--no-memory] [--dir D]
//   burst_runtime_bench dispatch [--orgs 10] [--per-org 1000] [--cycles 2000] [--dir D] [--database URL]
//   burst_runtime_bench all      (both, default flags)
//
// submit: jobs accepted per second through the real HTTP API. An in-process
//   ApiServer on port 0 over an on-disk SQLite Metadata and a file:// store,
//   a Runtime with a FakeExecutor and slots = 0 (nothing is ever dispatched:
//   jobs only queue), one organisation and API key made through Metadata, one
//   training file uploaded with POST /v1/files, then N POST
//   /v1/fine_tuning/jobs from K client threads (one keep-alive
//   httplib::Client each), once with httplib's default client (Nagle on) and
//   once with TCP_NODELAY on the clients. In the same run: a what-if with
//   TCP_NODELAY also on the server's sockets (set from here on its listening
//   socket; ApiServer does not set it), references Metadata::CreateJob alone
//   (one INSERT per job, single thread, the same row) and Runtime::Submit
//   alone (what the handler calls, without HTTP, single thread), and two
//   diagnostics: the what-if over an in-memory database (no fsync) and a bare
//   httplib::Server answering a same-sized body, Nagle on and off.
// dispatch: the scheduler's decision with ~10,000 jobs queued. A Runtime over
//   on-disk SQLite (or the --database given: PostgreSQL), FakeExecutor, slots = 1, `orgs` organisations with
//   `per-org` queued jobs each; the one worker registers, then each cycle is
//   Lease(wait 0) -> Submit(one new job, orgs in turn) -> Finish(completed),
//   so the queue stays at orgs x per-org - 1. After Submit and after Finish
//   it reads Runtime::last_dispatch_ns() (the decision alone) and times the
//   whole Finish call (the database writes included).
//
// Every measurement prints one JSON line on stdout ({"bench": ...}); a
// readable summary follows at the end. Errors: a message on stderr, exit 1.
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/server.h"
#include "core/fs.h"
#include "core/ids.h"
#include "core/json.h"
#include "core/status.h"
#include "db/metadata.h"
#include "runtime/executor.h"
#include "runtime/runtime.h"
#include "store/object_store.h"

#ifndef BURST_SOURCE_DIR
#define BURST_SOURCE_DIR "."
#endif

namespace burst {
namespace {

namespace fs = std::filesystem;
using Steady = std::chrono::steady_clock;

template <typename T>
T Must(Result<T> r, const char* what) {
  if (!r.ok()) throw Error(Code::kInternal, std::string(what) + ": " + r.status().ToString());
  return std::move(r).value();
}
void Must(const Status& s, const char* what) {
  if (!s.ok()) throw Error(Code::kInternal, std::string(what) + ": " + s.ToString());
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch()).count();
}

// Nearest-rank percentile of unsorted samples (p in [0, 100]).
double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}
double Max(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}
double R3(double x) { return std::round(x * 1000) / 1000; }

// A scratch folder, removed at exit unless --keep.
struct TempDir {
  fs::path path;
  bool keep = false;
  explicit TempDir(const std::string& parent, const std::string& tag) {
    fs::path base = parent.empty() ? fs::temp_directory_path() : fs::path(parent);
    fs::create_directories(base);
    std::string tmpl = (base / ("burst-rtbench-" + tag + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data()))
      throw Error(Code::kUnavailable, "cannot create a folder under " + base.string());
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!keep) fs::remove_all(path, ec);
  }
};

std::vector<std::string> g_summary;  // readable lines, printed at the end

void Emit(const Json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

// The job request both parts post: the shipped model, one step.
Json JobBody(const std::string& file_id) {
  return {{"model", "burst-small"},
          {"training_file", file_id},
          {"recipe", {{"max_steps", 1}, {"batch_size", 4}}}};
}

// The first `lines` lines of the support demo's training set.
std::string TrainingSample(int lines) {
  std::ifstream in(std::string(BURST_SOURCE_DIR) + "/examples/support/train.jsonl");
  if (!in)
    throw Error(Code::kNotFound,
                std::string("cannot read ") + BURST_SOURCE_DIR + "/examples/support/train.jsonl");
  std::string out, line;
  for (int i = 0; i < lines && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

// ----------------------------------------------------------------------------
// submit

struct SubmitArgs {
  int jobs = 5000;
  int clients = 8;
  int warmup = 100;
  int reference_jobs = 5000;
  int http_threads = 16;
  bool memory = true;
  std::string dir;
  bool keep = false;
};

struct LoadResult {
  double wall_s = 0;
  std::vector<double> lat_ms;
  int errors = 0;
  std::string first_error;
};

// N POSTs of `body` to `path` from K client threads, one keep-alive
// httplib::Client each, connected before the clock starts.
LoadResult PostLoad(int port, const httplib::Headers& headers, const std::string& path,
                    const std::string& body, int jobs, int clients, bool nodelay) {
  std::atomic<int> next{0};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<LoadResult> per(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  for (int k = 0; k < clients; ++k) {
    threads.emplace_back([&, k] {
      httplib::Client c("127.0.0.1", port);
      c.set_keep_alive(true);
      c.set_tcp_nodelay(nodelay);
      c.set_read_timeout(60, 0);
      c.Get("/v1/health");  // connect before the clock starts
      LoadResult& mine = per[static_cast<size_t>(k)];
      mine.lat_ms.reserve(static_cast<size_t>(jobs / clients + 1));
      ++ready;
      while (!go.load()) std::this_thread::yield();
      for (;;) {
        if (next.fetch_add(1) >= jobs) break;
        const int64_t t0 = NowNs();
        auto r = c.Post(path, headers, body, "application/json");
        mine.lat_ms.push_back(static_cast<double>(NowNs() - t0) / 1e6);
        if (!r || r->status != 200) {
          if (mine.errors++ == 0)
            mine.first_error = r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error());
        }
      }
    });
  }
  while (ready.load() < clients) std::this_thread::yield();
  const auto t0 = Steady::now();
  go = true;
  for (auto& t : threads) t.join();
  LoadResult out;
  out.wall_s = std::chrono::duration<double>(Steady::now() - t0).count();
  for (auto& m : per) {
    out.lat_ms.insert(out.lat_ms.end(), m.lat_ms.begin(), m.lat_ms.end());
    out.errors += m.errors;
    if (out.first_error.empty()) out.first_error = m.first_error;
  }
  return out;
}

// The transport alone: a bare httplib::Server (same thread pool size) whose
// POST handler answers a fixed JSON body of `reply_bytes`, with TCP_NODELAY
// on its sockets or not.
LoadResult PlainHttp(bool server_nodelay, bool client_nodelay, size_t reply_bytes, const std::string& body,
                     int jobs, int clients, int threads) {
  httplib::Server http;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_tcp_nodelay(server_nodelay);
  const std::string reply =
      Json{{"object", "fine_tuning.job"}, {"pad", std::string(reply_bytes, 'x')}}.dump();
  http.Get("/v1/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{}", "application/json");
  });
  http.Post("/echo", [&reply](const httplib::Request& req, httplib::Response& res) {
    Json b = Json::parse(req.body, nullptr, false);  // parse like the API does
    res.status = b.is_object() ? 200 : 400;
    res.set_content(reply, "application/json");
  });
  const int port = http.bind_to_any_port("127.0.0.1");
  if (port < 0) throw Error(Code::kUnavailable, "cannot bind a port");
  std::thread serving([&] { http.listen_after_bind(); });
  while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  LoadResult r = PostLoad(port, {}, "/echo", body, jobs, clients, client_nodelay);
  http.stop();
  serving.join();
  return r;
}

// What-if without editing src/: sets TCP_NODELAY on this process's listening
// socket on `port` (found among /proc/self/fd); Linux copies the option to
// every connection accepted from it. Returns whether one was found.
bool SetListenerNoDelay(int port) {
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    int fd = 0;
    try {
      fd = std::stoi(e.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || ss.ss_family != AF_INET) continue;
    int listening = 0;
    socklen_t ol = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) != 0 || !listening) continue;
    if (ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port) != port) continue;
    int yes = 1;
    return ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes) == 0;
  }
  return false;
}

struct ApiRun {
  double wall_s = 0;
  std::vector<double> lat_ms;
  int errors = 0;
  std::string first_error;
  size_t queued = 0;
  Json spec;  // one created job's spec (the reference inserts reuse it)
  std::string org_id;
  std::string body;        // the request body posted
  size_t reply_bytes = 0;  // the size of one answer (a job object)
};

// One in-process API server over `db_path` (":memory:" allowed); N job
// submissions from K client threads after `warmup` untimed ones.
ApiRun RunApi(const std::string& db_path, const fs::path& dir, const SubmitArgs& a, bool client_nodelay,
              bool server_nodelay = false) {
  auto md = Must(Metadata::Open(db_path), "open metadata");
  auto store = Must(OpenObjectStore("file://" + (dir / "store").string()), "open store");
  Org org = Must(md->CreateOrg("bench"), "create org");
  NewApiKey key = Must(md->CreateApiKey(org.id, "bench"), "create key");

  SystemClock clock;
  FakeExecutor exec(clock);
  RuntimeOptions ro;
  ro.slots = 0;  // the no-op task kind: jobs queue, nothing is dispatched
  ro.threads_per_slot = 2;
  ro.store_url = "file://" + (dir / "store").string();
  Runtime rt(*md, exec, clock, ro);
  rt.StartTicker();  // as `burst serve` does
  ServerOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.http.max_threads = a.http_threads;
  so.model_roots = {fs::path(BURST_SOURCE_DIR) / "models"};
  ApiServer server(*md, *store, rt, so);
  Must(server.Bind(), "bind");
  if (server_nodelay && !SetListenerNoDelay(server.port())) {
    throw Error(Code::kInternal, "cannot find the API server's listening socket");
  }
  std::thread serving([&] { server.Serve(); });
  const int port = server.port();
  struct Stopper {
    ApiServer& s;
    std::thread& t;
    Runtime& rt;
    ~Stopper() {
      s.Stop();
      if (t.joinable()) t.join();
      rt.Shutdown(false, 0);
    }
  } stopper{server, serving, rt};

  const httplib::Headers auth = {{"Authorization", "Bearer " + key.secret}};
  httplib::Client c0("127.0.0.1", port);
  c0.set_read_timeout(60, 0);
  for (int i = 0; i < 200; ++i) {  // until the listener is up
    if (auto r = c0.Get("/v1/health"); r && r->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  httplib::MultipartFormDataItems items = {{"file", TrainingSample(64), "train.jsonl", "application/jsonl"},
                                           {"purpose", "fine-tune", "", ""}};
  auto up = c0.Post("/v1/files", auth, items);
  if (!up || up->status != 200) {
    throw Error(Code::kInternal, "upload failed: " + (up ? up->body : httplib::to_string(up.error())));
  }
  const std::string file_id = Json::parse(up->body).at("id").get<std::string>();
  const std::string body = JobBody(file_id).dump();

  ApiRun run;
  run.org_id = org.id;
  for (int i = 0; i < a.warmup; ++i) {
    auto r = c0.Post("/v1/fine_tuning/jobs", auth, body, "application/json");
    if (!r || r->status != 200) {
      throw Error(Code::kInternal, "warm-up submit failed: " + (r ? r->body : httplib::to_string(r.error())));
    }
    if (i == 0) {
      run.body = body;
      run.reply_bytes = r->body.size();
      const std::string id = Json::parse(r->body).at("id").get<std::string>();
      run.spec = Must(md->GetJobById(id), "read job").spec;
    }
  }

  LoadResult load = PostLoad(port, auth, "/v1/fine_tuning/jobs", body, a.jobs, a.clients, client_nodelay);
  run.wall_s = load.wall_s;
  run.lat_ms = std::move(load.lat_ms);
  run.errors = load.errors;
  run.first_error = load.first_error;
  run.queued = rt.QueuedCount();
  return run;
}

JobRecord ReferenceJob(const std::string& org_id, const Json& spec) {
  JobRecord j;
  j.id = NewId("ftjob");
  j.org_id = org_id;
  j.status = JobStatus::kQueued;
  j.spec = spec;
  j.request_sha256 = Sha256Hex(j.id);
  j.total_steps = 1;
  return j;
}

Json LoadJson(const std::string& bench, const LoadResult& r, int jobs, int clients) {
  return {{"bench", bench},
          {"jobs", jobs},
          {"clients", clients},
          {"wall_s", R3(r.wall_s)},
          {"jobs_per_s", R3(jobs / r.wall_s)},
          {"p50_ms", R3(Pct(r.lat_ms, 50))},
          {"p99_ms", R3(Pct(r.lat_ms, 99))},
          {"max_ms", R3(Max(r.lat_ms))},
          {"errors", r.errors},
          {"first_error", r.first_error}};
}

std::string LoadLine(const std::string& what, const LoadResult& r, int jobs) {
  char buf[400];
  std::snprintf(buf, sizeof buf, "%-58s %7.0f jobs/s  p50 %7.2f ms  p99 %7.2f ms  errors %d", what.c_str(),
                jobs / r.wall_s, Pct(r.lat_ms, 50), Pct(r.lat_ms, 99), r.errors);
  return buf;
}

int Submit(const SubmitArgs& a) {
  if (a.jobs < 1 || a.clients < 1) throw Error(Code::kInvalidArgument, "--jobs and --clients must be >= 1");
  TempDir dir(a.dir, "submit");
  dir.keep = a.keep;
  int errors = 0;
  auto api_json = [&](const ApiRun& r, const std::string& db, bool nodelay, bool server_nodelay) {
    LoadResult l{r.wall_s, r.lat_ms, r.errors, r.first_error};
    Json j = LoadJson("api_submit", l, a.jobs, a.clients);
    j["db"] = db;
    j["client_nodelay"] = nodelay;
    // false: as shipped (ApiServer does not set TCP_NODELAY); true: set by
    // the bench on the listening socket (what-if)
    j["server_nodelay"] = server_nodelay;
    j["http_threads"] = a.http_threads;
    j["queued_after"] = r.queued;
    Emit(j);
    errors += r.errors;
    if (r.errors) std::fprintf(stderr, "api_submit: %d errors, first: %s\n", r.errors, r.first_error.c_str());
    return l;
  };

  // 1. Through HTTP, on-disk SQLite (what `burst serve` runs): with httplib's
  //    default client (Nagle on, like the CLI's and the workers' clients),
  //    then with TCP_NODELAY on the clients (as a client that sends headers
  //    and body in one segment, e.g. Python's http.client, behaves).
  ApiRun api_default = RunApi((dir.path / "meta.db").string(), dir.path, a, false);
  LoadResult l_default = api_json(api_default, "disk", false, false);
  ApiRun api = RunApi((dir.path / "meta2.db").string(), dir.path, a, true);
  LoadResult l_api = api_json(api, "disk", true, false);
  const double api_rate = a.jobs / api.wall_s;
  // What-if: TCP_NODELAY on the server's sockets too (set from outside).
  ApiRun api_fast = RunApi((dir.path / "meta3.db").string(), dir.path, a, true, true);
  LoadResult l_fast = api_json(api_fast, "disk", true, true);
  const double fast_rate = a.jobs / api_fast.wall_s;

  // 2. Reference: Metadata::CreateJob alone, the same row, single thread.
  auto ref_md = Must(Metadata::Open((dir.path / "reference.db").string()), "open reference db");
  Org ref_org = Must(ref_md->CreateOrg("bench"), "create org");
  std::vector<double> ins_ms;
  ins_ms.reserve(static_cast<size_t>(a.reference_jobs));
  const auto r0 = Steady::now();
  for (int i = 0; i < a.reference_jobs; ++i) {
    JobRecord j = ReferenceJob(ref_org.id, api.spec);
    bool created = false;
    const int64_t t0 = NowNs();
    Must(ref_md->CreateJob(std::move(j), &created), "CreateJob");
    ins_ms.push_back(static_cast<double>(NowNs() - t0) / 1e6);
  }
  const double ins_wall = std::chrono::duration<double>(Steady::now() - r0).count();
  const double ins_rate = a.reference_jobs / ins_wall;
  Emit({{"bench", "sqlite_insert"},
        {"db", "disk"},
        {"via", "Metadata::CreateJob"},
        {"jobs", a.reference_jobs},
        {"wall_s", R3(ins_wall)},
        {"jobs_per_s", R3(ins_rate)},
        {"p50_ms", R3(Pct(ins_ms, 50))},
        {"p99_ms", R3(Pct(ins_ms, 99))},
        {"api_over_insert", R3(api_rate / ins_rate)},
        {"api_nodelay_over_insert", R3(fast_rate / ins_rate)}});

  // 3. Reference: Runtime::Submit alone (the handler's call: the job row and
  //    two events, three commits), single thread, no HTTP.
  auto sub_md = Must(Metadata::Open((dir.path / "submit.db").string()), "open submit db");
  Org sub_org = Must(sub_md->CreateOrg("bench"), "create org");
  std::vector<double> sub_ms;
  double sub_wall = 0;
  {
    SystemClock clock;
    FakeExecutor exec(clock);
    RuntimeOptions ro;
    ro.slots = 0;
    Runtime rt(*sub_md, exec, clock, ro);
    const auto s0 = Steady::now();
    for (int i = 0; i < a.reference_jobs; ++i) {
      JobRecord j = ReferenceJob(sub_org.id, api.spec);
      bool created = false;
      const int64_t t0 = NowNs();
      Must(rt.Submit(std::move(j), &created), "Runtime::Submit");
      sub_ms.push_back(static_cast<double>(NowNs() - t0) / 1e6);
    }
    sub_wall = std::chrono::duration<double>(Steady::now() - s0).count();
  }
  const double sub_rate = a.reference_jobs / sub_wall;
  Emit({{"bench", "runtime_submit"},
        {"db", "disk"},
        {"via", "Runtime::Submit"},
        {"jobs", a.reference_jobs},
        {"wall_s", R3(sub_wall)},
        {"jobs_per_s", R3(sub_rate)},
        {"p50_ms", R3(Pct(sub_ms, 50))},
        {"p99_ms", R3(Pct(sub_ms, 99))},
        {"api_over_submit", R3(api_rate / sub_rate)},
        {"api_nodelay_over_submit", R3(fast_rate / sub_rate)}});

  // 4. Diagnostics: the HTTP run over an in-memory database (no fsync), and
  //    a bare httplib server answering the same-sized body (the transport
  //    alone), with and without TCP_NODELAY on the server's sockets.
  LoadResult l_mem, l_plain_off, l_plain_on;
  if (a.memory) {
    TempDir mdir(a.dir, "submit-mem");
    ApiRun mem = RunApi(":memory:", mdir.path, a, true, true);
    l_mem = api_json(mem, "memory", true, true);
    l_plain_off = PlainHttp(false, true, api.reply_bytes, api.body, a.jobs, a.clients, a.http_threads);
    Json j = LoadJson("plain_httplib", l_plain_off, a.jobs, a.clients);
    j["server_nodelay"] = false;
    j["client_nodelay"] = true;
    j["reply_bytes"] = api.reply_bytes;
    Emit(j);
    l_plain_on = PlainHttp(true, true, api.reply_bytes, api.body, a.jobs, a.clients, a.http_threads);
    j = LoadJson("plain_httplib", l_plain_on, a.jobs, a.clients);
    j["server_nodelay"] = true;
    j["client_nodelay"] = true;
    j["reply_bytes"] = api.reply_bytes;
    Emit(j);
  }

  char buf[512];
  std::snprintf(buf, sizeof buf,
                "job submissions, %d timed after %d warm-up, %d client threads, %d server threads:", a.jobs,
                a.warmup, a.clients, a.http_threads);
  g_summary.push_back(buf);
  g_summary.push_back("  " + LoadLine("HTTP API, on-disk SQLite, httplib default client", l_default, a.jobs));
  g_summary.push_back("  " + LoadLine("HTTP API, on-disk SQLite, client TCP_NODELAY", l_api, a.jobs));
  g_summary.push_back("  " + LoadLine("what-if: the same, server TCP_NODELAY too", l_fast, a.jobs));
  std::snprintf(buf, sizeof buf, "  %-58s %7.0f jobs/s  p50 %7.2f ms  p99 %7.2f ms",
                "reference: Metadata::CreateJob, 1 thread", ins_rate, Pct(ins_ms, 50), Pct(ins_ms, 99));
  g_summary.push_back(buf);
  std::snprintf(buf, sizeof buf, "  %-58s %7.0f jobs/s  p50 %7.2f ms  p99 %7.2f ms",
                "reference: Runtime::Submit, 1 thread, no HTTP", sub_rate, Pct(sub_ms, 50), Pct(sub_ms, 99));
  g_summary.push_back(buf);
  if (a.memory) {
    g_summary.push_back("  " + LoadLine("what-if: in-memory SQLite, TCP_NODELAY both sides", l_mem, a.jobs));
    g_summary.push_back(
        "  " + LoadLine("diagnostic: bare httplib server, Nagle on (as ApiServer)", l_plain_off, a.jobs));
    g_summary.push_back("  " + LoadLine("diagnostic: bare httplib server, TCP_NODELAY", l_plain_on, a.jobs));
  }
  const double shipped = std::max(api_rate, a.jobs / l_default.wall_s);
  std::snprintf(
      buf, sizeof buf,
      "  API/CreateJob = %.2f (what-if %.2f), API/Runtime::Submit = %.2f (what-if %.2f); goal >= 1000 "
      "jobs/s as shipped: %s (%.0f)",
      api_rate / ins_rate, fast_rate / ins_rate, api_rate / sub_rate, fast_rate / sub_rate,
      shipped >= 1000 ? "MET" : "NOT MET", shipped);
  g_summary.push_back(buf);
  return errors ? 1 : 0;
}

// ----------------------------------------------------------------------------
// dispatch

struct DispatchArgs {
  int orgs = 10;
  int per_org = 1000;
  int cycles = 2000;
  std::string dir;
  std::string database;  // "" = SQLite in the scratch folder; else a URL (postgresql://...)
  bool keep = false;
};

int Dispatch(const DispatchArgs& a) {
  if (a.orgs < 1 || a.per_org < 1 || a.cycles < 1) throw Error(Code::kInvalidArgument, "sizes must be >= 1");
  TempDir dir(a.dir, "dispatch");
  dir.keep = a.keep;
  auto md = Must(Metadata::Open(a.database.empty() ? (dir.path / "meta.db").string() : a.database),
                 "open metadata");
  const std::string db = a.database.empty() ? "sqlite" : a.database.substr(0, a.database.find(':'));
  std::vector<std::string> orgs;
  for (int i = 0; i < a.orgs; ++i)
    orgs.push_back(Must(md->CreateOrg("org" + std::to_string(i)), "create org").id);
  SystemClock clock;
  FakeExecutor exec(clock);
  RuntimeOptions ro;
  ro.slots = 1;
  ro.threads_per_slot = 2;
  Runtime rt(*md, exec, clock, ro);
  const Json spec = {{"model", "burst-small"},
                     {"base_model", "burst-small"},
                     {"training_file", "file-bench"},
                     {"train_key", "orgs/x/files/file-bench"},
                     {"recipe", {{"max_steps", 1}, {"batch_size", 4}}}};
  int64_t n = 0;
  auto submit = [&](const std::string& org) {
    JobRecord j;
    j.id = NewId("ftjob");
    j.org_id = org;
    j.request_sha256 = j.id;
    j.spec = spec;
    j.total_steps = 1;
    bool created = false;
    Must(rt.Submit(std::move(j), &created), "Runtime::Submit");
    ++n;
  };
  // Fill the queues, organisations in turn (the first submit asks the
  // executor for the one worker; it stays "starting" until registered).
  const auto f0 = Steady::now();
  for (int i = 0; i < a.per_org; ++i)
    for (const auto& o : orgs) submit(o);
  const double fill_s = std::chrono::duration<double>(Steady::now() - f0).count();
  if (exec.started.size() != 1)
    throw Error(Code::kInternal, "expected one worker start, got " + std::to_string(exec.started.size()));
  const std::string worker = exec.started.back().worker_id;
  Must(rt.Register(worker, 4242), "Register");  // takes the first task
  const size_t queued_start = rt.QueuedCount();

  std::vector<double> decision_finish_us, decision_submit_us, finish_ms, lease_ms, submit_ms;
  std::map<std::string, int> served;  // org -> tasks leased
  const auto c0 = Steady::now();
  for (int c = 0; c < a.cycles; ++c) {
    int64_t t0 = NowNs();
    auto lease = Must(rt.Lease(worker, "burst-small", 0), "Lease");
    lease_ms.push_back(static_cast<double>(NowNs() - t0) / 1e6);
    if (!lease) throw Error(Code::kInternal, "cycle " + std::to_string(c) + ": no task leased");
    const Json& task = *lease;
    const std::string job = task.at("job").get<std::string>();
    const int64_t attempt = task.at("attempt").get<int64_t>();
    ++served[task.at("org").get<std::string>()];

    t0 = NowNs();
    submit(orgs[static_cast<size_t>(c) % orgs.size()]);
    submit_ms.push_back(static_cast<double>(NowNs() - t0) / 1e6);
    decision_submit_us.push_back(static_cast<double>(rt.last_dispatch_ns()) / 1e3);

    t0 = NowNs();
    Must(rt.Finish(worker, job, attempt, "completed", Json(), false, 1, 512), "Finish");
    finish_ms.push_back(static_cast<double>(NowNs() - t0) / 1e6);
    decision_finish_us.push_back(static_cast<double>(rt.last_dispatch_ns()) / 1e3);
  }
  const double cycles_s = std::chrono::duration<double>(Steady::now() - c0).count();
  const size_t queued_end = rt.QueuedCount();
  int served_min = a.cycles, served_max = 0;
  for (const auto& o : orgs) {
    served_min = std::min(served_min, served[o]);
    served_max = std::max(served_max, served[o]);
  }
  Emit({{"bench", "dispatch_decision"},
        {"db", db},
        {"after", "finish"},
        {"orgs", a.orgs},
        {"queued", queued_start},
        {"queued_end", queued_end},
        {"cycles", a.cycles},
        {"p50_us", R3(Pct(decision_finish_us, 50))},
        {"p99_us", R3(Pct(decision_finish_us, 99))},
        {"max_us", R3(Max(decision_finish_us))},
        {"mean_us", R3(Mean(decision_finish_us))}});
  Emit({{"bench", "dispatch_decision"},
        {"db", db},
        {"after", "submit"},
        {"orgs", a.orgs},
        {"queued", queued_start},
        {"cycles", a.cycles},
        {"p50_us", R3(Pct(decision_submit_us, 50))},
        {"p99_us", R3(Pct(decision_submit_us, 99))},
        {"max_us", R3(Max(decision_submit_us))}});
  Emit({{"bench", "finish_call"},
        {"db", db},
        {"cycles", a.cycles},
        {"p50_ms", R3(Pct(finish_ms, 50))},
        {"p99_ms", R3(Pct(finish_ms, 99))},
        {"max_ms", R3(Max(finish_ms))}});
  Emit({{"bench", "dispatch_cycle"},
        {"db", db},
        {"cycles", a.cycles},
        {"cycles_per_s", R3(a.cycles / cycles_s)},
        {"lease_p50_ms", R3(Pct(lease_ms, 50))},
        {"lease_p99_ms", R3(Pct(lease_ms, 99))},
        {"submit_p50_ms", R3(Pct(submit_ms, 50))},
        {"submit_p99_ms", R3(Pct(submit_ms, 99))},
        {"fill_jobs", a.orgs * a.per_org},
        {"fill_s", R3(fill_s)},
        {"served_per_org_min", served_min},
        {"served_per_org_max", served_max}});

  const double p99_us = Pct(decision_finish_us, 99);
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "dispatch decision (%s), %zu queued over %d orgs, %d cycles: p50 %.1f us, p99 %.1f us, max %.1f us "
      "-> goal p99 < 1 ms %s",
      db.c_str(), queued_start, a.orgs, a.cycles, Pct(decision_finish_us, 50), p99_us,
      Max(decision_finish_us), p99_us < 1000 ? "MET" : "NOT MET");
  g_summary.push_back(buf);
  std::snprintf(buf, sizeof buf,
                "  whole Finish call (database writes included): p50 %.2f ms, p99 %.2f ms, max %.2f ms",
                Pct(finish_ms, 50), Pct(finish_ms, 99), Max(finish_ms));
  g_summary.push_back(buf);
  std::snprintf(buf, sizeof buf,
                "  decision after Submit: p50 %.1f us, p99 %.1f us; Lease p50 %.2f ms; Submit p50 %.2f ms; "
                "tasks per org %d..%d; queue filled at %.0f jobs/s",
                Pct(decision_submit_us, 50), Pct(decision_submit_us, 99), Pct(lease_ms, 50),
                Pct(submit_ms, 50), served_min, served_max, (a.orgs * a.per_org) / fill_s);
  g_summary.push_back(buf);
  return 0;
}

void PrintSummary() {
  if (g_summary.empty()) return;
  std::fprintf(stderr, "\n== summary ==\n");
  for (const auto& l : g_summary) std::fprintf(stderr, "%s\n", l.c_str());
}

int Main(int argc, char** argv) {
  CLI::App app{"burst_runtime_bench: the serverless runtime's control plane (docs/bench.md)"};
  app.require_subcommand(1);
  SubmitArgs sa;
  DispatchArgs da;
  auto* sub = app.add_subcommand("submit", "jobs accepted per second through the HTTP API");
  sub->add_option("--jobs", sa.jobs, "timed submissions")->capture_default_str();
  sub->add_option("--clients", sa.clients, "client threads (keep-alive connection each)")
      ->capture_default_str();
  sub->add_option("--warmup", sa.warmup, "untimed submissions first")->capture_default_str();
  sub->add_option("--reference-jobs", sa.reference_jobs,
                  "rows for the CreateJob / Runtime::Submit references")
      ->capture_default_str();
  sub->add_option("--http-threads", sa.http_threads, "server request threads")->capture_default_str();
  sub->add_flag("!--no-memory", sa.memory, "skip the in-memory-database diagnostic run");
  sub->add_option("--dir", sa.dir, "scratch parent folder (default: $TMPDIR or /tmp)");
  sub->add_flag("--keep", sa.keep, "keep the scratch folder");
  auto* dis = app.add_subcommand("dispatch", "dispatch decision latency with many jobs queued");
  dis->add_option("--orgs", da.orgs, "organisations")->capture_default_str();
  dis->add_option("--per-org", da.per_org, "queued jobs per organisation")->capture_default_str();
  dis->add_option("--cycles", da.cycles, "lease/submit/finish cycles")->capture_default_str();
  dis->add_option("--dir", da.dir, "scratch parent folder");
  dis->add_option("--database", da.database,
                  "metadata database URL, e.g. postgresql://... on an empty database (default: SQLite in the "
                  "scratch folder)");
  dis->add_flag("--keep", da.keep, "keep the scratch folder");
  auto* all = app.add_subcommand("all", "submit, then dispatch, default flags");
  std::string all_dir;
  all->add_option("--dir", all_dir, "scratch parent folder");
  CLI11_PARSE(app, argc, argv);
  int rc = 0;
  try {
    if (*sub) rc = Submit(sa);
    if (*dis) rc = Dispatch(da);
    if (*all) {
      sa.dir = da.dir = all_dir;
      rc = Submit(sa);
      rc = Dispatch(da) || rc;
    }
  } catch (const std::exception& e) {
    PrintSummary();
    std::fprintf(stderr, "burst_runtime_bench: %s\n", e.what());
    return 1;
  }
  PrintSummary();
  return rc;
}

}  // namespace
}  // namespace burst

int main(int argc, char** argv) { return burst::Main(argc, argv); }
