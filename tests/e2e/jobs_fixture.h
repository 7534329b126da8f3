// The jobs suites' fixture (one binary, e2e_jobs_test; tests/e2e/README.md
// names its files): real `burst serve` processes, which start real
// `burst worker` processes, spoken to over real HTTP.
//
// Most tests share one server (1 slot of 1 thread, scaledown window 3 s,
// lease TTL 3 s); each waits for what it needs (an empty pool, a terminal
// job) with generous deadlines rather than fixed sleeps, so any order
// works. Tests that kill the control plane run a server of their own. A
// background poller watches the shared server's worker pool from start to
// end: the usage ledger is checked against the worker lifetimes it observed.
//
// The executor is the local one, or Slurm with BURST_E2E_EXECUTOR=slurm
// (CTest's e2e_jobs_on_slurm_test; e2e_slurm.h).
//
// On a failure the job, its events, the workers' logs and the server's
// output are printed. BURST_E2E_KEEP=1 keeps the data folders;
// BURST_E2E_TRACE=1 prints every request the tests send.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <regex>

#include "e2e_slurm.h"
#include "e2e_util.h"

namespace burst::e2e::jobs {

using SteadyClock = std::chrono::steady_clock;

inline int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::string Tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

inline bool Terminal(const std::string& status) {
  return status == "succeeded" || status == "failed" || status == "cancelled";
}

inline std::string RandomSuffix() {
  std::random_device rd;
  return std::to_string(rd()) + std::to_string(rd());
}

// An HTTP answer: status 0 when none came.
struct Resp {
  int status = 0;
  Json body;  // null when the body is not JSON
  std::string raw;
  std::string Describe() const {
    return status ? "HTTP " + std::to_string(status) + " " + raw.substr(0, 2000) : "no HTTP answer";
  }
};

// An API key and its organisation.
struct OrgKey {
  std::string org_id, key;
};

// What the poller saw of one worker.
struct SeenWorker {
  int64_t requested_at = -1;         // seconds, as /v1/workers shows it
  int64_t last_present_sent_ms = 0;  // sent time of the last request that listed it
  int64_t gone_recv_ms = 0;          // receive time of the first answer without it (0: not yet)
  int64_t pid = 0;
};

// ----------------------------------------------------------------------------
// one `burst serve`

class Server {
 public:
  // port 0: any free port (then restarts get a new one).
  explicit Server(std::vector<std::string> flags, int port = 0)
      : flags_(E2eExecutor::With(std::move(flags))), port_(port), data_(MakeTempDir("burst-e2e-jobs")) {}
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server() {
    StopPoller();
    Stop();
    if (std::getenv("BURST_E2E_KEEP")) {
      std::fprintf(stderr, "[e2e] kept %s\n", data_.string().c_str());
    } else {
      std::error_code ec;
      fs::remove_all(data_, ec);
    }
  }

  // Starts `burst serve` and waits until it listens. Throws on failure.
  void Start() {
    std::vector<std::string> args = {BurstBinary(),  "serve",    "--data",
                                     data_.string(), "--listen", "127.0.0.1:" + std::to_string(port_)};
    args.insert(args.end(), flags_.begin(), flags_.end());
    proc_ = std::make_unique<Process>(args);
    std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    std::smatch m;
    std::string out;
    const bool up = WaitUntil(
        [&] {
          out = proc_->StdoutSoFar();
          return std::regex_search(out, m, listening) || !proc_->Running();
        },
        30, 20);
    if (!up || !std::regex_search(out, m, listening)) {
      throw std::runtime_error("burst serve did not start:\n" + proc_->Wait(1).Describe());
    }
    port_ = std::stoi(m[1]);
    std::regex org_line("organisation \"default\" \\((org-[A-Za-z0-9]+)\\)");
    if (std::regex_search(out, m, org_line)) admin_.org_id = m[1];
    admin_.key = Slurp(data_ / "admin.key");
    while (!admin_.key.empty() && admin_.key.back() == '\n') admin_.key.pop_back();
    if (admin_.key.empty()) throw std::runtime_error("no " + (data_ / "admin.key").string());
  }

  // Sends `sig` to `burst serve` and reaps it (SIGKILL after wait_s).
  ProcResult Signal(int sig, double wait_s) {
    if (!proc_) return {};
    proc_->Signal(sig);
    ProcResult r = proc_->Wait(wait_s);
    past_output_ += r.out + r.err;
    proc_.reset();
    return r;
  }

  // SIGTERM (workers are told to leave first), then any worker this server
  // started that is somehow still alive is killed by its pid.
  void Stop() {
    if (proc_) Signal(SIGTERM, 60);
    std::map<std::string, int64_t> pids;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pids = pids_;
    }
    for (const auto& [id, pid] : pids) {
      if (ProcessHas(pid, "BURST_WORKER_ID=" + id)) {
        std::fprintf(stderr, "[e2e] worker %s (pid %lld) outlived its server; killing it\n", id.c_str(),
                     static_cast<long long>(pid));
        ::kill(static_cast<pid_t>(pid), SIGKILL);
      }
    }
  }

  bool Running() { return proc_ && proc_->Running(); }

  // True when /v1/health answers; when it does not, waits a little for the
  // process to end so that State() can tell how.
  bool Alive() {
    if (Send("GET", "/v1/health", "", "", {}, /*auth=*/false).status == 200) return true;
    WaitUntil([&] { return !Running(); }, 10);
    return false;
  }

  // Whether `burst serve` still runs; if it ended, how, with its output.
  std::string State() {
    if (!proc_) return "\n(burst serve is not started)";
    if (proc_->Running()) return "\n(burst serve is running)";
    ProcResult r = proc_->Wait(1);
    return "\n(burst serve ended: " + r.Describe() + ")";
  }
  int port() const { return port_; }
  const fs::path& data() const { return data_; }
  const OrgKey& admin() const { return admin_; }
  const std::string& key() const { return admin_.key; }

  // ---- HTTP

  Resp Send(const std::string& method, const std::string& path, const std::string& body = "",
            const std::string& key = "", httplib::Headers extra = {}, bool auth = true) {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(60, 0);
    httplib::Headers h = std::move(extra);
    if (auth) h.emplace("Authorization", "Bearer " + (key.empty() ? admin_.key : key));
    httplib::Result r = method == "GET"    ? c.Get(path, h)
                        : method == "POST" ? c.Post(path, h, body, "application/json")
                                           : c.Delete(path, h);
    Resp out;
    if (std::getenv("BURST_E2E_TRACE"))
      std::fprintf(stderr, "[trace] %s %s %s -> %d\n", method.c_str(), path.c_str(),
                   body.substr(0, 200).c_str(), r ? r->status : 0);
    if (!r) return out;
    out.status = r->status;
    out.raw = r->body;
    out.body = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (out.body.is_discarded()) out.body = Json();
    return out;
  }
  Resp Get(const std::string& path, const std::string& key = "") { return Send("GET", path, "", key); }
  Resp Post(const std::string& path, const Json& body, const std::string& key = "",
            httplib::Headers extra = {}) {
    return Send("POST", path, body.dump(), key, std::move(extra));
  }
  // GET that must answer 200 with JSON; throws otherwise.
  Json GetOk(const std::string& path, const std::string& key = "") {
    Resp r = Get(path, key);
    if (r.status != 200 || !r.body.is_object()) {
      throw std::runtime_error("GET " + path + ": " + r.Describe() + (r.status == 0 ? State() : ""));
    }
    return r.body;
  }

  // Uploads a JSONL file; its id. Throws unless 200.
  std::string Upload(const std::string& name, const std::string& content, const std::string& key = "",
                     const std::string& purpose = "fine-tune") {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    httplib::MultipartFormDataItems items = {{"purpose", purpose, "", ""},
                                             {"file", content, name, "application/jsonl"}};
    auto r = c.Post("/v1/files", {{"Authorization", "Bearer " + (key.empty() ? admin_.key : key)}}, items);
    if (!r || r->status != 200) {
      throw std::runtime_error("upload of " + name + " failed: " + (r ? r->body : std::string("no answer")));
    }
    return Json::parse(r->body)["id"].get<std::string>();
  }

  // Creates a job; its id. Throws unless 200.
  std::string Submit(const Json& body, const std::string& key = "") {
    Resp r = Post("/v1/fine_tuning/jobs", body, key);
    if (r.status != 200 || !r.body.contains("id")) {
      throw std::runtime_error("POST /v1/fine_tuning/jobs " + body.dump() + ": " + r.Describe() +
                               (r.status == 0 ? State() : ""));
    }
    return r.body["id"].get<std::string>();
  }

  Json Job(const std::string& id, const std::string& key = "") {
    return GetOk("/v1/fine_tuning/jobs/" + id, key);
  }

  // All of a job's events, oldest first.
  Json Events(const std::string& id, const std::string& key = "") {
    return GetOk("/v1/fine_tuning/jobs/" + id + "/events?order=asc&limit=10000", key)["data"];
  }

  Json Workers() {
    Json w = GetOk("/v1/workers");
    std::lock_guard<std::mutex> lock(mu_);
    for (const Json& x : w["data"]) {
      if (x["pid"].is_number()) pids_[x["id"].get<std::string>()] = x["pid"].get<int64_t>();
    }
    return w;
  }
  // The live worker running `job_id` (null when none).
  Json WorkerOf(const std::string& job_id) {
    const Json pool = Workers();
    for (const Json& w : pool["data"])
      if (w["job"].is_string() && w["job"] == job_id) return w;
    return Json();
  }
  bool PoolEmpty() {
    try {
      return Workers()["data"].empty();
    } catch (const std::exception&) {
      return false;
    }
  }

  // The job, its events, the workers' logs and this server's output.
  std::string Diagnose(const std::string& job_id, const std::string& key = "") {
    std::ostringstream s;
    s << "\n===== diagnosis of " << job_id << " (data " << data_.string() << ") =====\n";
    try {
      Resp job = Get("/v1/fine_tuning/jobs/" + job_id, key);
      s << "--- job ---\n" << (job.body.is_object() ? job.body.dump(1) : job.Describe()) << "\n";
      Resp ev = Get("/v1/fine_tuning/jobs/" + job_id + "/events?order=asc&limit=10000", key);
      s << "--- events ---\n";
      if (ev.body.is_object()) {
        for (const Json& e : ev.body["data"]) {
          s << e.value("created_at", int64_t{0}) << " " << e.value("level", "") << " " << e.value("type", "")
            << " " << e.value("message", "") << "\n";
        }
      } else {
        s << ev.Describe() << "\n";
      }
      Resp w = Get("/v1/workers");
      s << "--- workers ---\n" << w.raw << "\n";
    } catch (const std::exception& e) {
      s << "(API error: " << e.what() << ")\n";
    }
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(data_ / "workers" / "logs", ec)) {
      s << "--- " << e.path().filename().string() << " ---\n" << Tail(Slurp(e.path()), 3000) << "\n";
    }
    s << "--- burst serve ---" << State() << "\n"
      << Tail(past_output_ + (proc_ ? proc_->StdoutSoFar() + proc_->StderrSoFar() : std::string()), 3000)
      << "\n";
    return s.str();
  }

  // Waits for the job to reach a terminal status; the last job object seen.
  Json WaitJob(const std::string& id, double timeout_s = 180, const std::string& key = "") {
    Json job;
    const bool done = WaitUntil(
        [&] {
          Resp r = Get("/v1/fine_tuning/jobs/" + id, key);
          if (r.status == 200) job = r.body;
          return job.is_object() && Terminal(job.value("status", ""));
        },
        timeout_s, 100);
    if (!done)
      ADD_FAILURE() << "job " << id << " not finished after " << timeout_s << " s" << Diagnose(id, key);
    return job;
  }

  // Waits until every attempt of the job has an outcome; the job.
  Json WaitAttemptsSettled(const std::string& id, double timeout_s = 30, const std::string& key = "") {
    Json job;
    const bool done = WaitUntil(
        [&] {
          job = Job(id, key);
          for (const Json& a : job["attempts"])
            if (a["outcome"].is_null()) return false;
          return true;
        },
        timeout_s, 100);
    if (!done)
      ADD_FAILURE() << "attempts of " << id << " still open after " << timeout_s << " s" << Diagnose(id, key);
    return job;
  }

  // `burst orgs create NAME --data DATA --json`, when this build has it.
  std::optional<OrgKey> CreateOrg(const std::string& name) {
    ProcResult r = RunBurst({"orgs", "create", name, "--data", data_.string(), "--json"}, 60);
    if (!r.ok()) {
      std::fprintf(stderr, "[e2e] `burst orgs create` is not available: %s\n", r.Describe().c_str());
      return std::nullopt;
    }
    Json j = Json::parse(r.out, nullptr, false);
    if (!j.is_object() || !j.contains("api_key")) {
      std::fprintf(stderr, "[e2e] `burst orgs create --json` printed no api_key: %s\n", r.out.c_str());
      return std::nullopt;
    }
    return OrgKey{j.value("organization_id", ""), j["api_key"].get<std::string>()};
  }

  // ---- the pool poller

  void StartPoller() {
    polling_ = true;
    poller_ = std::thread([this] {
      while (polling_) {
        const int64_t sent = WallMs();
        Resp r = Get("/v1/workers");
        const int64_t recv = WallMs();
        if (r.status == 200 && r.body.is_object()) {
          std::lock_guard<std::mutex> lock(mu_);
          std::set<std::string> present;
          for (const Json& w : r.body["data"]) {
            const std::string id = w["id"];
            present.insert(id);
            SeenWorker& s = seen_[id];
            s.requested_at = w.value("requested_at", int64_t{-1});
            s.last_present_sent_ms = sent;
            // Another organisation's work shows no pid: keep the one seen before.
            if (w["pid"].is_number()) {
              s.pid = w["pid"].get<int64_t>();
              pids_[id] = s.pid;
            }
          }
          for (auto& [id, s] : seen_)
            if (!present.count(id) && s.gone_recv_ms == 0) s.gone_recv_ms = recv;
          max_pool_ = std::max(max_pool_, r.body["data"].size());
          ++polls_;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(40));
      }
    });
  }
  void StopPoller() {
    polling_ = false;
    if (poller_.joinable()) poller_.join();
  }
  std::map<std::string, SeenWorker> Seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  size_t MaxPool() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_pool_;
  }
  int64_t Polls() {
    std::lock_guard<std::mutex> lock(mu_);
    return polls_;
  }

 private:
  std::vector<std::string> flags_;
  int port_ = 0;
  fs::path data_;
  std::unique_ptr<Process> proc_;
  OrgKey admin_;
  std::string past_output_;

  std::mutex mu_;
  std::map<std::string, int64_t> pids_;  // every worker ever seen -> pid, to clean up
  std::map<std::string, SeenWorker> seen_;
  size_t max_pool_ = 0;
  int64_t polls_ = 0;
  std::atomic<bool> polling_{false};
  std::thread poller_;
};

// ----------------------------------------------------------------------------
// jobs and their checkpoints

inline const std::vector<std::string> kFastFlags = {
    "--slots", "1", "--threads-per-slot", "1", "--scaledown-window", "3", "--lease-ttl", "3"};
inline constexpr int kSlots = 1;
inline constexpr double kScaledownS = 3;

// A small job on the support data.
inline Json Spec(const std::string& file, int64_t steps, const Json& recipe_extra = Json::object()) {
  Json recipe = {{"max_steps", steps}, {"batch_size", 4}, {"checkpoint_every", 2}, {"max_seq_len", 128}};
  for (auto it = recipe_extra.begin(); it != recipe_extra.end(); ++it) recipe[it.key()] = it.value();
  return {{"model", "burst-small"}, {"training_file", file}, {"recipe", recipe}};
}

// The job that fault tests interrupt, and that runs once without faults.
inline constexpr int64_t kFaultSteps = 40;
inline Json FaultSpec(const std::string& file) {
  Json s = Spec(file, kFaultSteps, {{"checkpoint_every", 5}});
  s["seed"] = 7;
  return s;
}

// The job's folder in the server's file object store.
inline fs::path JobStoreDir(const Server& s, const Json& job) {
  return s.data() / "store" / "objects" / "orgs" / job["organization_id"].get<std::string>() / "jobs" /
         job["id"].get<std::string>();
}

// sha256 of the final checkpoint's weights: state/trainable.safetensors,
// state/optimizer.safetensors, sampler/adapter_model.safetensors.
// In the server's store, wherever it is (E2eExecutor::StoreKeySha).
inline std::map<std::string, std::string> FinalWeights(const Server& s, const Json& job, int64_t step) {
  std::map<std::string, std::string> out;
  const fs::path objects = s.data() / "store" / "objects";
  const std::string dir = StepDir(JobStoreDir(s, job), step).lexically_relative(objects).string();
  for (const char* f :
       {"state/trainable.safetensors", "state/optimizer.safetensors", "sampler/adapter_model.safetensors"}) {
    out[f] = E2eExecutor::StoreKeySha(s.data(), dir + "/" + f);
  }
  return out;
}

// step -> train_loss from the job's metrics events (the last report of each step).
inline std::map<int64_t, double> TrainLosses(const Json& events) {
  std::map<int64_t, double> out;
  for (const Json& e : events) {
    if (e.value("type", "") != "metrics" || !e["data"].is_object()) continue;
    if (e["data"].value("type", "train") != "train" || !e["data"].contains("train_loss")) continue;
    out[e["data"].value("step", int64_t{0})] = e["data"].value("train_loss", 0.0);
  }
  return out;
}

inline bool AnyMessage(const Json& events, const std::string& part) {
  for (const Json& e : events)
    if (Contains(e.value("message", ""), part)) return true;
  return false;
}

inline std::vector<std::string> Outcomes(const Json& job) {
  std::vector<std::string> out;
  for (const Json& a : job["attempts"])
    out.push_back(a["outcome"].is_string() ? a["outcome"].get<std::string>() : "null");
  return out;
}

inline std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// Every error answer has the contract's shape.
inline void ExpectError(const Resp& r, int status, const std::string& code, const Json& param = Json(),
                        const std::string& message_part = "") {
  EXPECT_EQ(r.status, status) << r.Describe();
  ASSERT_TRUE(r.body.is_object() && r.body.contains("error") && r.body["error"].is_object()) << r.Describe();
  const Json& e = r.body["error"];
  EXPECT_EQ(e.value("code", ""), code) << r.Describe();
  EXPECT_TRUE(e.contains("message") && e["message"].is_string() && e.contains("param")) << r.Describe();
  if (!param.is_null()) {
    EXPECT_EQ(e["param"], param) << r.Describe();
  }
  if (!message_part.empty()) {
    EXPECT_TRUE(Contains(e.value("message", ""), message_part)) << r.Describe();
  }
}

// ----------------------------------------------------------------------------
// the fixture: one shared server for the suite

class JobsTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    delete shared_;
    shared_ = nullptr;
  }

  // The shared server, started on first use, with its pool poller and the
  // support training data uploaded.
  static Server& Shared() {
    if (!shared_) {
      auto s = std::make_unique<Server>(kFastFlags);
      s->Start();
      s->StartPoller();
      train_file_ = s->Upload("support-train.jsonl", Slurp(SupportTrain()));
      shared_ = s.release();
    }
    return *shared_;
  }
  static const std::string& TrainFile() {
    Shared();
    return train_file_;
  }

  // A second organisation on the shared server (nullopt when this build has
  // no `burst orgs create`) and its copy of the training data.
  static std::optional<OrgKey> OrgB() {
    if (!org_b_tried_) {
      org_b_tried_ = true;
      org_b_ = Shared().CreateOrg("team-b");
      if (org_b_) org_b_file_ = Shared().Upload("support-train.jsonl", Slurp(SupportTrain()), org_b_->key);
    }
    return org_b_;
  }

  // The fault job run once without faults on the shared server: its final
  // weights and per-step losses.
  struct Reference {
    std::map<std::string, std::string> weights;
    std::map<int64_t, double> losses;
  };
  static const Reference& Clean() {
    if (!reference_) {
      Server& s = Shared();
      const std::string id = s.Submit(FaultSpec(TrainFile()));
      Json job = s.WaitJob(id);
      if (job.value("status", "") != "succeeded") {
        throw std::runtime_error("the fault-free reference job did not succeed" + s.Diagnose(id));
      }
      Reference r;
      r.weights = FinalWeights(s, job, kFaultSteps);
      r.losses = TrainLosses(s.Events(id));
      if (r.losses.size() != static_cast<size_t>(kFaultSteps)) {
        throw std::runtime_error("the reference job reported " + std::to_string(r.losses.size()) +
                                 " train losses, expected " + std::to_string(kFaultSteps) + s.Diagnose(id));
      }
      reference_ = r;
    }
    return *reference_;
  }

  // Waits until the job runs and has reached `step` (GET job .step); false
  // when it ended or the deadline passed first.
  static bool WaitRunningAtStep(Server& s, const std::string& id, int64_t step, double timeout_s = 120) {
    bool ok = false;
    WaitUntil(
        [&] {
          Json j = s.Job(id);
          if (j["status"] == "running" && j.value("step", int64_t{0}) >= step) ok = true;
          return ok || Terminal(j.value("status", ""));
        },
        timeout_s, 25);
    return ok;
  }

  static void ExpectSameWeights(const std::map<std::string, std::string>& got, const Reference& ref,
                                const std::string& what) {
    for (const auto& [file, sha] : ref.weights) {
      EXPECT_EQ(got.at(file), sha) << what << ": final " << file << " differs from the fault-free run";
    }
  }

  static void ExpectSameLosses(const Json& events, const Reference& ref, const std::string& what) {
    std::map<int64_t, double> got = TrainLosses(events);
    EXPECT_EQ(got.size(), ref.losses.size()) << what;
    for (const auto& [step, loss] : ref.losses) {
      auto it = got.find(step);
      if (it == got.end()) {
        ADD_FAILURE() << what << ": no train_loss for step " << step;
        continue;
      }
      EXPECT_EQ(it->second, loss) << what << ": train_loss at step " << step
                                  << " differs from the fault-free run";
    }
  }

  inline static Server* shared_ = nullptr;
  inline static std::string train_file_;
  inline static bool org_b_tried_ = false;
  inline static std::optional<OrgKey> org_b_;
  inline static std::string org_b_file_;
  inline static std::optional<Reference> reference_;
};

}  // namespace burst::e2e::jobs
