// burst_db_bench: job submissions per second on the metadata database,
// SQLite and PostgreSQL in the same run (docs/bench.md, "Metadata on
// PostgreSQL").
//
//   burst_db_bench [--jobs 3000] [--clients 8] [--postgres URL] [--dir D] [--keep]
//
// Without --postgres it starts a PostgreSQL 15 of its own with
// tests/pg/pg-up.sh in the scratch folder (unix socket; fsync and
// synchronous_commit on, as a server should run) and stops it at the end;
// with --postgres URL (a superuser's, to any database) it creates its
// databases there. SQLite is a file in the same scratch folder (WAL,
// synchronous=FULL, as shipped). For each backend, on a fresh database:
//
//   create_job      Metadata::CreateJob with the two first events, one
//                   transaction (what Runtime::Submit writes), 1 thread;
//   runtime_submit  Runtime::Submit (the API handler's call), 1 thread;
//   api_submit      POST /v1/fine_tuning/jobs through an in-process
//                   ApiServer (a Runtime with slots = 0: jobs only queue, a
//                   file:// store, one uploaded file) from K keep-alive
//                   clients with TCP_NODELAY, after 50 untimed ones; every
//                   answer must be 200;
//   api_two_planes  (PostgreSQL) the same from two ApiServers, each with its
//                   own Runtime and Metadata (connection), on one database,
//                   K/2 clients each: two control planes sharing it.
//
// One JSON line per measurement on stdout, a table on stderr at the end.
// Errors: a message on stderr, exit 1.
#include <httplib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "api/server.h"
#include "core/fs.h"
#include "core/ids.h"
#include "core/json.h"
#include "core/subprocess.h"
#include "db/db.h"
#include "db/metadata.h"
#include "runtime/executor.h"
#include "runtime/runtime.h"
#include "store/object_store.h"

#ifndef BURST_SOURCE_DIR
#define BURST_SOURCE_DIR "."
#endif

namespace burst {
namespace {

using Steady = std::chrono::steady_clock;

template <typename T>
T Must(Result<T> r, const std::string& what) {
  if (!r.ok()) throw Error(r.status().code(), what + ": " + r.status().ToString());
  return std::move(r).value();
}
void Must(const Status& s, const std::string& what) {
  if (!s.ok()) throw Error(s.code(), what + ": " + s.ToString());
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}
double R3(double x) { return std::round(x * 1000) / 1000; }
double Ms(Steady::time_point t0) {
  return std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
}

struct Args {
  int jobs = 3000;
  int clients = 8;
  std::string postgres;  // a superuser URL; empty: start one
  std::string dir;
  bool keep = false;
};

struct Measure {
  std::string bench, backend;
  int jobs = 0;
  double wall_s = 0;
  std::vector<double> lat_ms;
  int errors = 0;
};

std::vector<Measure> g_results;

void Emit(const Measure& m) {
  Json j{{"bench", m.bench},
         {"backend", m.backend},
         {"jobs", m.jobs},
         {"wall_s", R3(m.wall_s)},
         {"jobs_per_s", R3(m.jobs / m.wall_s)},
         {"p50_ms", R3(Pct(m.lat_ms, 50))},
         {"p99_ms", R3(Pct(m.lat_ms, 99))},
         {"errors", m.errors}};
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  g_results.push_back(m);
}

// Where fresh databases come from: files for SQLite, CREATE DATABASE on the
// server for PostgreSQL.
class Databases {
 public:
  Databases(fs::path dir, std::string admin_url) : dir_(std::move(dir)), admin_url_(std::move(admin_url)) {}
  std::string Sqlite() { return (dir_ / ("meta" + std::to_string(++n_) + ".db")).string(); }
  std::string Postgres() {
    if (!admin_) admin_ = Must(Db::Open(admin_url_), "connect to PostgreSQL");
    const std::string name = "burst_bench_" + std::to_string(::getpid()) + "_" + std::to_string(++n_);
    Must(admin_->Exec("CREATE DATABASE " + name +
                      " TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"),
         "create database");
    created_.push_back(name);
    // The same server and credentials, another database.
    const size_t q = admin_url_.find('?');
    const size_t slash = admin_url_.find('/', admin_url_.find("://") + 3);
    std::string url = admin_url_.substr(0, slash == std::string::npos || slash > q ? q : slash) + "/" + name;
    if (q != std::string::npos) url += admin_url_.substr(q);
    return url;
  }
  ~Databases() {
    if (!admin_) return;
    for (const auto& n : created_)
      admin_->Exec("DROP DATABASE IF EXISTS " + n).IgnoreError("scratch, best effort");
  }

 private:
  fs::path dir_;
  std::string admin_url_;
  std::unique_ptr<Db> admin_;
  std::vector<std::string> created_;
  int n_ = 0;
};

JobRecord BenchJob(const std::string& org_id) {
  JobRecord j;
  j.id = NewId("ftjob");
  j.org_id = org_id;
  j.request_sha256 = Sha256Hex(j.id);
  j.spec = Json{{"model", "burst-small"}, {"training_file", "file-x"}, {"recipe", {{"max_steps", 1}}}};
  j.total_steps = 1;
  return j;
}

void CreateJobs(const std::string& backend, const std::string& url, int jobs) {
  auto md = Must(Metadata::Open(url), "open " + url);
  const std::string org = Must(md->CreateOrg("bench"), "create org").id;
  Measure m{"create_job", backend, jobs, 0, {}, 0};
  std::vector<EventRecord> first(2);
  const auto t0 = Steady::now();
  for (int i = 0; i < jobs; ++i) {
    const auto s = Steady::now();
    bool created = false;
    if (!md->CreateJob(BenchJob(org), &created, first).ok()) ++m.errors;
    m.lat_ms.push_back(Ms(s));
  }
  m.wall_s = Ms(t0) / 1000;
  Emit(m);
}

void RuntimeSubmits(const std::string& backend, const std::string& url, int jobs) {
  auto md = Must(Metadata::Open(url), "open " + url);
  const std::string org = Must(md->CreateOrg("bench"), "create org").id;
  SystemClock clock;
  FakeExecutor exec(clock);
  RuntimeOptions ro;
  ro.slots = 0;
  Runtime rt(*md, exec, clock, ro);
  Measure m{"runtime_submit", backend, jobs, 0, {}, 0};
  const auto t0 = Steady::now();
  for (int i = 0; i < jobs; ++i) {
    const auto s = Steady::now();
    bool created = false;
    if (!rt.Submit(BenchJob(org), &created).ok()) ++m.errors;
    m.lat_ms.push_back(Ms(s));
  }
  m.wall_s = Ms(t0) / 1000;
  Emit(m);
}

// One control plane: Metadata, Runtime and ApiServer over `url`.
struct Plane {
  std::unique_ptr<Metadata> md;
  std::unique_ptr<ObjectStore> store;
  SystemClock clock;
  FakeExecutor exec{clock};
  std::unique_ptr<Runtime> rt;
  std::unique_ptr<ApiServer> server;
  std::thread serving;

  Plane(const std::string& url, const fs::path& dir) {
    md = Must(Metadata::Open(url), "open " + url);
    store = Must(OpenObjectStore("file://" + (dir / "store").string()), "open store");
    RuntimeOptions ro;
    ro.slots = 0;  // jobs only queue
    ro.store_url = "file://" + (dir / "store").string();
    rt = std::make_unique<Runtime>(*md, exec, clock, ro);
    rt->StartTicker();
    ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.model_roots = {fs::path(BURST_SOURCE_DIR) / "models"};
    server = std::make_unique<ApiServer>(*md, *store, *rt, so);
    Must(server->Bind(), "bind");
    serving = std::thread([this] { server->Serve(); });
  }
  ~Plane() {
    server->Stop();
    if (serving.joinable()) serving.join();
    rt->Shutdown(false, 0);
  }
};

// POSTs `body` from `clients` threads spread over `ports` until `jobs` are
// done; latencies of every request.
Measure Load(const std::vector<int>& ports, const httplib::Headers& auth, const std::string& body, int jobs,
             int clients) {
  std::atomic<int> next{0}, ready{0}, errors{0};
  std::atomic<bool> go{false};
  std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  for (int k = 0; k < clients; ++k) {
    threads.emplace_back([&, k] {
      httplib::Client c("127.0.0.1", ports[static_cast<size_t>(k) % ports.size()]);
      c.set_keep_alive(true);
      c.set_tcp_nodelay(true);
      c.set_read_timeout(60, 0);
      c.Get("/v1/health");
      ++ready;
      while (!go.load()) std::this_thread::yield();
      while (next.fetch_add(1) < jobs) {
        const auto s = Steady::now();
        auto r = c.Post("/v1/fine_tuning/jobs", auth, body, "application/json");
        lat[static_cast<size_t>(k)].push_back(Ms(s));
        if (!r || r->status != 200) {
          if (errors++ == 0) std::fprintf(stderr, "submit failed: %s\n", r ? r->body.c_str() : "no answer");
        }
      }
    });
  }
  while (ready.load() < clients) std::this_thread::yield();
  const auto t0 = Steady::now();
  go = true;
  for (auto& t : threads) t.join();
  Measure m;
  m.wall_s = Ms(t0) / 1000;
  m.errors = errors.load();
  for (auto& l : lat) m.lat_ms.insert(m.lat_ms.end(), l.begin(), l.end());
  return m;
}

void ApiSubmits(const std::string& bench, const std::string& backend, const std::vector<std::string>& urls,
                const fs::path& dir, const Args& a) {
  std::vector<std::unique_ptr<Plane>> planes;
  for (const auto& u : urls) planes.push_back(std::make_unique<Plane>(u, dir));
  Metadata& md = *planes[0]->md;
  const std::string org = Must(md.CreateOrg("bench"), "create org").id;
  const NewApiKey key = Must(md.CreateApiKey(org, "bench"), "create key");
  const httplib::Headers auth = {{"Authorization", "Bearer " + key.secret}};
  std::vector<int> ports;
  for (auto& p : planes) ports.push_back(p->server->port());
  httplib::Client c0("127.0.0.1", ports[0]);
  for (int i = 0; i < 200; ++i) {
    if (auto r = c0.Get("/v1/health"); r && r->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ifstream in(std::string(BURST_SOURCE_DIR) + "/examples/support/train.jsonl");
  std::string sample, line;
  for (int i = 0; i < 64 && std::getline(in, line); ++i) sample += line + "\n";
  httplib::MultipartFormDataItems items = {{"file", sample, "train.jsonl", "application/jsonl"},
                                           {"purpose", "fine-tune", "", ""}};
  auto up = c0.Post("/v1/files", auth, items);
  if (!up || up->status != 200)
    throw Error(Code::kInternal, "upload failed: " + (up ? up->body : "no answer"));
  const std::string file_id = Json::parse(up->body).at("id").get<std::string>();
  const std::string body = Json{{"model", "burst-small"},
                                {"training_file", file_id},
                                {"recipe", {{"max_steps", 1}, {"batch_size", 4}}}}
                               .dump();
  Measure warm = Load(ports, auth, body, 50, std::min(a.clients, 2));
  if (warm.errors) throw Error(Code::kInternal, "warm-up submissions failed");
  Measure m = Load(ports, auth, body, a.jobs, a.clients);
  m.bench = bench;
  m.backend = backend;
  m.jobs = a.jobs;
  Emit(m);
  size_t queued = 0;
  for (auto& p : planes) queued += p->rt->QueuedCount();
  if (queued != static_cast<size_t>(a.jobs + 50) || m.errors) {
    throw Error(Code::kInternal, bench + " on " + backend + ": " + std::to_string(queued) +
                                     " jobs queued of " + std::to_string(a.jobs + 50) + ", " +
                                     std::to_string(m.errors) + " errors");
  }
}

int Main(int argc, char** argv) {
  CLI::App app{"burst_db_bench: submissions per second on SQLite and PostgreSQL (docs/bench.md)"};
  Args a;
  app.add_option("--jobs", a.jobs, "submissions per measurement")->capture_default_str();
  app.add_option("--clients", a.clients, "HTTP client threads")->capture_default_str();
  app.add_option("--postgres", a.postgres, "a superuser's URL to an existing server (default: start one)");
  app.add_option("--dir", a.dir, "scratch parent folder (default: /tmp)");
  app.add_flag("--keep", a.keep, "keep the scratch folder");
  CLI11_PARSE(app, argc, argv);
  if (a.jobs < 1 || a.clients < 1) {
    std::fprintf(stderr, "burst_db_bench: --jobs and --clients must be >= 1\n");
    return 1;
  }
  const fs::path base = a.dir.empty() ? fs::temp_directory_path() : fs::path(a.dir);
  // Two folders side by side: SQLite's and the scratch store, and the
  // server's (pg-up.sh hands it to the postgres user, which must reach it).
  std::string tmpl = (base / "burst-dbbench-XXXXXX").string();
  std::string pg_tmpl = (base / "burst-dbbench-pg-XXXXXX").string();
  if (!::mkdtemp(tmpl.data()) || !::mkdtemp(pg_tmpl.data())) {
    std::fprintf(stderr, "burst_db_bench: cannot create a folder under %s\n", base.c_str());
    return 1;
  }
  const fs::path dir = tmpl;
  const std::string pg_dir = pg_tmpl;
  bool started = false;
  int rc = 0;
  try {
    std::string admin = a.postgres;
    if (admin.empty()) {
      const std::string port = std::to_string(20000 + ::getpid() % 20000);
      auto up =
          Must(RunCommand({std::string(BURST_SOURCE_DIR) + "/tests/pg/pg-up.sh", pg_dir, port}, 120'000),
               "pg-up.sh");
      if (up.exit_code != 0) throw Error(Code::kUnavailable, "pg-up.sh: " + up.err + up.out);
      started = true;
      admin = "postgresql://postgres@/postgres?host=" + pg_dir + "&port=" + port;
    }
    Databases dbs(dir, admin);
    for (const std::string backend : {"sqlite", "postgresql"}) {
      auto fresh = [&] { return backend == "sqlite" ? dbs.Sqlite() : dbs.Postgres(); };
      CreateJobs(backend, fresh(), a.jobs);
      RuntimeSubmits(backend, fresh(), a.jobs);
      ApiSubmits("api_submit", backend, {fresh()}, dir, a);
      if (backend == "postgresql") {
        const std::string shared = fresh();
        ApiSubmits("api_two_planes", backend, {shared, shared}, dir, a);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "burst_db_bench: %s\n", e.what());
    rc = 1;
  }
  if (started) {
    auto down = RunCommand({std::string(BURST_SOURCE_DIR) + "/tests/pg/pg-down.sh", pg_dir}, 120'000);
    if (!down.ok() || down.value().exit_code != 0)
      std::fprintf(stderr, "burst_db_bench: pg-down.sh failed\n");
  }
  std::fprintf(stderr, "\n%-16s %-11s %9s %9s %9s\n", "bench", "backend", "jobs/s", "p50 ms", "p99 ms");
  for (const auto& m : g_results) {
    std::fprintf(stderr, "%-16s %-11s %9.0f %9.2f %9.2f\n", m.bench.c_str(), m.backend.c_str(),
                 m.jobs / m.wall_s, Pct(m.lat_ms, 50), Pct(m.lat_ms, 99));
  }
  if (!a.keep) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::remove_all(pg_dir, ec);
  }
  return rc;
}

}  // namespace
}  // namespace burst

int main(int argc, char** argv) { return burst::Main(argc, argv); }
