// Two `burst serve` on one PostgreSQL (a real server this test starts with
// tests/pg/pg-up.sh): one is active, the other stands by, and the leader
// lease in the database decides. kill -9 of the active one while a job
// trains: the standby takes over within 10 s, adopts the running worker
// (which was given both addresses and follows the leader), and the job ends
// with the bytes of an undisturbed run; no job runs twice and the usage
// ledger has no overlap. Then the whole shape of docs/deploy.md: workers as
// Slurm jobs (a real single-node Slurm) that see none of the control
// planes' folders, the store and the base model in a bucket (a real
// radosgw), scancel of the worker and kill -9 of the active control plane
// in one job, ending with the bytes of the embedded defaults.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdlib>

#include "core/fs.h"
#include "core/subprocess.h"
#include "e2e_cluster.h"
#include "e2e_http.h"
#include "e2e_loops.h"
#include "store/s3_test_service.h"

namespace burst::e2e {
namespace {

constexpr int64_t kSteps = 24;

const std::vector<std::string> kFlags = {
    "--slots",     "1", "--threads-per-slot", "1", "--scaledown-window", "3",
    "--lease-ttl", "6", "--leader-ttl",       "3"};

Json Spec(const std::string& file) {
  return {
      {"model", "burst-small"},
      {"training_file", file},
      {"seed", 11},
      {"recipe", {{"max_steps", kSteps}, {"batch_size", 4}, {"checkpoint_every", 3}, {"max_seq_len", 128}}}};
}

std::string AdapterSha(const ServeProcess& s, const Json& job) {
  char step[32];
  std::snprintf(step, sizeof(step), "step-%08lld", static_cast<long long>(kSteps));
  const fs::path f = s.dir() / "data" / "store" / "objects" / "orgs" /
                     job["organization_id"].get<std::string>() / "jobs" / job["id"].get<std::string>() /
                     "checkpoints" / step / "sampler" / "adapter_model.safetensors";
  return fs::is_regular_file(f) ? Sha256File(f) : "(missing " + f.string() + ")";
}

Json WaitJob(const ServeProcess& s, const std::string& id, double timeout_s = 300) {
  Json job;
  WaitUntil(
      [&] {
        Resp r = s.Send("GET", "/v1/fine_tuning/jobs/" + id);
        if (r.status != 200) return false;
        job = r.body;
        const std::string st = job.value("status", "");
        return st == "succeeded" || st == "failed" || st == "cancelled";
      },
      timeout_s, 200);
  return job;
}

std::string Role(const ServeProcess& s) {
  return s.Send("GET", "/v1/health").body.value("role", "(no answer)");
}

class FailoverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pg_ = new TempDir("burst-e2e-pg");
    port_ = 21000 + static_cast<int>(::getpid() % 20000);
    auto r = RunCommand({(SourceDir() / "tests/pg/pg-up.sh").string(), pg_->path().string(),
                         std::to_string(port_), "-c", "fsync=off"},
                        120'000);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r.value().exit_code, 0) << r.value().out << r.value().err;
  }
  static void TearDownTestSuite() {
    (void)RunCommand({(SourceDir() / "tests/pg/pg-down.sh").string(), pg_->path().string()},
                     60'000);  // best effort: the folder goes next
    delete pg_;
  }
  // The job's adapter on the embedded defaults, undisturbed.
  static const std::string& Reference() {
    static std::string sha;
    if (sha.empty()) {
      ServeProcess local("burst-e2e-failover-ref", kFlags);
      EXPECT_TRUE(local.error().empty()) << local.error();
      Resp c = local.Send("POST", "/v1/fine_tuning/jobs", Spec(local.Upload(SupportTrain())));
      EXPECT_EQ(c.status, 200) << c.Describe();
      if (c.status != 200) return sha;
      Json job = WaitJob(local, c.body["id"]);
      EXPECT_EQ(job.value("status", ""), "succeeded") << job.dump();
      sha = AdapterSha(local, job);
    }
    return sha;
  }
  // A fresh database on the test's server; "" or why not.
  static std::string CreateDatabase(const std::string& name) {
    auto r = RunCommand({"runuser", "-u", "postgres", "--", "psql", "-h", pg_->path().string(), "-p",
                         std::to_string(port_), "-c", "CREATE DATABASE " + name, "postgres"},
                        30'000);
    if (!r.ok()) return r.status().ToString();
    return r.value().exit_code == 0 ? "" : r.value().err;
  }
  static std::string Database(const std::string& name = "postgres") {
    return "postgresql://postgres@/" + name + "?host=" + pg_->path().string() +
           "&port=" + std::to_string(port_);
  }
  static TempDir* pg_;
  static int port_;
};
TempDir* FailoverTest::pg_ = nullptr;
int FailoverTest::port_ = 0;

TEST_F(FailoverTest, KillingTheActiveControlPlaneHandsTheJobToTheStandbyWithinTenSeconds) {
  const std::string ref = Reference();
  ASSERT_EQ(ref.size(), 64u) << ref;

  const int pa = FreeTcpPort(), pb = FreeTcpPort();
  ASSERT_TRUE(pa > 0 && pb > 0 && pa != pb);
  const std::string urls =
      "http://127.0.0.1:" + std::to_string(pa) + ",http://127.0.0.1:" + std::to_string(pb);
  std::vector<std::string> flags = kFlags;
  // Both share the database and one store folder (a shared file system or
  // a bucket in a real set-up); workers get both addresses.
  TempDir shared("burst-e2e-failover-store");
  flags.insert(flags.end(), {"--database", Database(), "--worker-url", urls, "--store",
                             "file://" + (shared.path() / "store").string()});
  ServeProcess a("burst-e2e-failover-a", flags, pa);
  ASSERT_TRUE(a.error().empty()) << a.error();
  ASSERT_TRUE(WaitUntil([&] { return Role(a) == "active"; }, 20)) << a.Output();
  ServeProcess b("burst-e2e-failover-b", flags, pb);
  ASSERT_TRUE(b.error().empty()) << b.error();
  b.set_key(a.key());
  EXPECT_EQ(Role(b), "standby") << b.Output();
  EXPECT_NE(b.Output().find("standby; the active control plane is at http://127.0.0.1:" + std::to_string(pa)),
            std::string::npos)
      << b.Output();
  // A standby refuses work, naming the active one.
  Resp refused = b.Send("GET", "/v1/fine_tuning/jobs");
  EXPECT_EQ(refused.status, 503) << refused.raw;
  EXPECT_EQ(refused.body["error"].value("code", ""), "standby") << refused.raw;

  const std::string file = a.Upload(SupportTrain());
  ASSERT_FALSE(file.empty());
  Resp created = a.Send("POST", "/v1/fine_tuning/jobs", Spec(file));
  ASSERT_EQ(created.status, 200) << created.Describe();
  const std::string id = created.body["id"];
  Json worker;
  ASSERT_TRUE(WaitUntil(
      [&] {
        Json job = a.Send("GET", "/v1/fine_tuning/jobs/" + id).body;
        worker = WorkerOf(a, id);
        return job.value("step", 0) >= 4 && worker.is_object();
      },
      120, 50))
      << a.Output();
  ASSERT_LT(a.Send("GET", "/v1/fine_tuning/jobs/" + id).body.value("step", 0), kSteps - 6) << "too late";

  ProcResult killed = a.Kill(SIGKILL, 30);
  ASSERT_EQ(killed.term_signal, SIGKILL) << killed.Describe();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil([&] { return Role(b) == "active"; }, 10, 50)) << b.Output();
  const double takeover_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[failover] the standby took over %.1f s after kill -9 of the active control plane\n",
              takeover_s);
  EXPECT_LT(takeover_s, 10.0);

  Json job = WaitJob(b, id);
  ASSERT_EQ(job.value("status", ""), "succeeded") << job.dump() << b.Output();
  // The worker that ran under A finished under B (adopted, not restarted), or
  // a lost attempt was retried from a checkpoint: never two at once.
  std::vector<std::string> outcomes;
  std::vector<std::pair<double, double>> spans;
  for (const Json& at : job["attempts"]) {
    outcomes.push_back(at.value("outcome", "running"));
    spans.emplace_back(at["started_at"].get<double>(),
                       at["ended_at"].is_null() ? 0.0 : at["ended_at"].get<double>());
  }
  std::printf("[failover] attempts: %s\n", job["attempts"].dump().c_str());
  ASSERT_FALSE(outcomes.empty());
  EXPECT_EQ(outcomes.back(), "completed") << job.dump();
  for (const std::string& o : outcomes) EXPECT_TRUE(o == "completed" || o == "lost") << job.dump();
  for (size_t i = 1; i < spans.size(); ++i)
    EXPECT_GE(spans[i].first + 1e-3, spans[i - 1].second) << job.dump();
  EXPECT_EQ(job["attempts"][0]["worker"], worker["id"]) << job.dump();
  // The shared store holds the adapter; compare it with the reference.
  const fs::path f = shared.path() / "store" / "objects" / "orgs" /
                     job["organization_id"].get<std::string>() / "jobs" / id / "checkpoints" /
                     "step-00000024" / "sampler" / "adapter_model.safetensors";
  EXPECT_EQ(fs::is_regular_file(f) ? Sha256File(f) : "(missing)", ref) << "the bytes of an undisturbed run";

  // The pool empties under B and the ledger adds up: every second billed is
  // the job's or idle, none twice.
  EXPECT_TRUE(
      WaitUntil([&] { return b.Send("GET", "/v1/workers").body.value("data", Json::array()).empty(); }, 60))
      << b.Send("GET", "/v1/workers").raw;
  Json usage = b.Send("GET", "/v1/usage").body;
  double idle = 0;
  for (const Json& l : usage.value("data", Json::array()))
    if (l["line"] == "idle") idle += l["seconds"].get<double>();
  const double job_s = b.Send("GET", "/v1/fine_tuning/jobs/" + id).body["usage"]["seconds"].get<double>();
  EXPECT_NEAR(usage["total_seconds"].get<double>(), job_s + idle, 0.01) << usage.dump();
}

// Training loops move with the leadership: a loop trained through the
// active control plane goes on through the standby after kill -9 of the
// active one (its journal lives in the shared store), a request in flight
// at the kill included, and its results and final weights are those of a
// loop never interrupted. `flags`: the pool and store both control planes
// share (besides the database and the workers' addresses).
void LoopsSurviveTheActiveDying(const std::string& database, std::vector<std::string> flags) {
  const int pa = FreeTcpPort(), pb = FreeTcpPort();
  ASSERT_TRUE(pa > 0 && pb > 0 && pa != pb);
  flags.insert(flags.end(),
               {"--database", database, "--worker-url",
                "http://127.0.0.1:" + std::to_string(pa) + ",http://127.0.0.1:" + std::to_string(pb)});
  ServeProcess a("burst-e2e-failover-loops-a", flags, pa);
  ASSERT_TRUE(a.error().empty()) << a.error();
  ASSERT_TRUE(WaitUntil([&] { return Role(a) == "active"; }, 20)) << a.Output();
  ServeProcess b("burst-e2e-failover-loops-b", flags, pb);
  ASSERT_TRUE(b.error().empty()) << b.error();
  b.set_key(a.key());

  const std::vector<int64_t> seqs[2] = {{5, 17, 42, 9, 100, 7, 7, 300, 12, 44, 45, 46, 2},
                                        {8, 9, 10, 11, 12, 13, 14, 15}};
  auto step = [&](const ServeProcess& s, const std::string& model, int64_t i) {
    Json fb =
        TinkerResult(s, TinkerForwardBackward(s, model, 2 * i + 1, Json::array({TinkerDatum(seqs[i % 2])})));
    EXPECT_TRUE(TinkerResult(s, TinkerOptimStep(s, model, 2 * i + 2, 1e-2)).is_object());
    return fb.dump();
  };
  // What the loop computes at the end: its weights, as its logprobs show them bit for bit.
  auto final_logprobs = [&](const ServeProcess& s, const std::string& model) {
    return TinkerResult(s,
                        TinkerForwardBackward(s, model, 13, Json::array({TinkerDatum(seqs[0], false)}), true))
        .dump();
  };
  const std::string model = TinkerModel(a, TinkerSession(a), 0, 3);
  ASSERT_FALSE(model.empty()) << a.Output();
  std::vector<std::string> results;
  for (int64_t i = 0; i < 3; ++i) results.push_back(step(a, model, i));
  Resp in_flight = TinkerForwardBackward(a, model, 7, Json::array({TinkerDatum(seqs[1])}));
  ASSERT_EQ(in_flight.status, 200) << in_flight.Describe();
  ProcResult killed = a.Kill(SIGKILL, 30);
  ASSERT_EQ(killed.term_signal, SIGKILL) << killed.Describe();
  ASSERT_TRUE(WaitUntil([&] { return Role(b) == "active"; }, 10, 50)) << b.Output();
  EXPECT_NE(b.Output().find("took over 1 training loop run"), std::string::npos) << b.Output();
  // The future made on A is answered by B; the loop goes on in order.
  results.push_back(TinkerResult(b, in_flight).dump());
  EXPECT_TRUE(TinkerResult(b, TinkerOptimStep(b, model, 8, 1e-2)).is_object());
  for (int64_t i = 4; i < 6; ++i) results.push_back(step(b, model, i));
  results.push_back(final_logprobs(b, model));

  // The same loop on B, never interrupted.
  const std::string calm = TinkerModel(b, TinkerSession(b), 0, 3);
  std::vector<std::string> calm_results;
  for (int64_t i = 0; i < 6; ++i) calm_results.push_back(step(b, calm, i));
  calm_results.push_back(final_logprobs(b, calm));
  EXPECT_EQ(results, calm_results) << "each step applied once, with the same bits, to the same weights";
}

TEST_F(FailoverTest, TheStandbyTakesTheTrainingLoopsOver) {
  ASSERT_EQ(CreateDatabase("loops"), "");
  TempDir shared("burst-e2e-failover-loops");
  std::vector<std::string> flags = kFlags;
  flags.insert(flags.end(), {"--store", "file://" + (shared.path() / "store").string()});
  LoopsSurviveTheActiveDying(Database("loops"), flags);
}

// Slurm + S3 + PostgreSQL: the job scales from zero on Slurm, survives
// scancel of its worker and kill -9 of the active control plane, and ends
// with the embedded defaults' bytes, read from the bucket with curl.
TEST_F(FailoverTest, OnSlurmS3AndPostgresAJobSurvivesScancelAndTheActiveControlPlaneDying) {
  const std::string ref = Reference();
  ASSERT_EQ(ref.size(), 64u) << ref;
  TestSlurm slurm;
  const std::string slurm_failed = slurm.Start();
  ASSERT_TRUE(slurm_failed.empty()) << slurm_failed;
  S3TestService s3;
  Status started = s3.Start(7880);
  ASSERT_TRUE(started.ok()) << started.ToString();

  const int pa = FreeTcpPort(), pb = FreeTcpPort();
  ASSERT_TRUE(pa > 0 && pb > 0 && pa != pb);
  const std::string prefix = "failover-" + std::to_string(::getpid());
  // A fresh database for this test: the first test's rows stay in the other.
  ASSERT_EQ(CreateDatabase("full_stack"), "");
  std::vector<std::string> flags = kFlags;
  flags.insert(flags.end(),
               {"--database", Database("full_stack"), "--worker-url",
                "http://127.0.0.1:" + std::to_string(pa) + ",http://127.0.0.1:" + std::to_string(pb),
                "--executor", "slurm", "--store", "s3://burst-test/" + prefix, "--s3-endpoint",
                std::getenv("BURST_TEST_S3_ENDPOINT"),
                // Workers that see none of the control planes' folders, as on cluster nodes.
                "--worker-exe", BlindWorkerExe(slurm.dir())});
  for (const std::string& f : WorkerEnvFlags()) flags.push_back(f);

  ServeProcess a("burst-e2e-full-a", flags, pa);
  ASSERT_TRUE(a.error().empty()) << a.error();
  ASSERT_TRUE(WaitUntil([&] { return Role(a) == "active"; }, 20)) << a.Output();
  ServeProcess b("burst-e2e-full-b", flags, pb);
  ASSERT_TRUE(b.error().empty()) << b.error();
  b.set_key(a.key());
  EXPECT_EQ(Role(b), "standby") << b.Output();
  EXPECT_EQ(LiveSlurmJobs(), "") << "nothing runs before there is work";

  const std::string file = a.Upload(SupportTrain());
  ASSERT_FALSE(file.empty());
  Resp created = a.Send("POST", "/v1/fine_tuning/jobs", Spec(file));
  ASSERT_EQ(created.status, 200) << created.Describe();
  const std::string id = created.body["id"];
  // 1. scancel of the worker at step >= 2: preempted, a new worker resumes.
  Json w1;
  ASSERT_TRUE(WaitUntil(
      [&] {
        w1 = WorkerOf(a, id);
        return a.Send("GET", "/v1/fine_tuning/jobs/" + id).body.value("step", 0) >= 2 && w1.is_object();
      },
      120, 50))
      << a.Output();
  auto cancel = RunCommand({"scancel", "--name=burst-" + w1["id"].get<std::string>()}, 10'000);
  ASSERT_TRUE(cancel.ok() && cancel.value().exit_code == 0);
  // 2. Once the second worker trains, kill -9 of the active control plane.
  ASSERT_TRUE(WaitUntil(
      [&] {
        Json w2 = WorkerOf(a, id);
        return w2.is_object() && w2["id"] != w1["id"] &&
               a.Send("GET", "/v1/fine_tuning/jobs/" + id).body.value("step", 0) >= 8;
      },
      120, 50))
      << a.Send("GET", "/v1/fine_tuning/jobs/" + id).raw << a.Output();
  ASSERT_LT(a.Send("GET", "/v1/fine_tuning/jobs/" + id).body.value("step", 0), kSteps) << "too late";
  ProcResult killed = a.Kill(SIGKILL, 30);
  ASSERT_EQ(killed.term_signal, SIGKILL) << killed.Describe();
  ASSERT_TRUE(WaitUntil([&] { return Role(b) == "active"; }, 10, 50)) << b.Output();

  Json job = WaitJob(b, id);
  ASSERT_EQ(job.value("status", ""), "succeeded") << job.dump() << b.Output();
  std::printf("[full stack] attempts: %s\n", job["attempts"].dump().c_str());
  ASSERT_GE(job["attempts"].size(), 2u) << job.dump();
  EXPECT_EQ(job["attempts"][0].value("outcome", ""), "preempted") << job.dump();
  EXPECT_EQ(job["attempts"].back().value("outcome", ""), "completed") << job.dump();
  // The adapter, from the bucket with curl.
  EXPECT_EQ(BucketObjectSha(prefix + "/orgs/" + job["organization_id"].get<std::string>() + "/jobs/" + id +
                            "/checkpoints/step-00000024/sampler/adapter_model.safetensors"),
            ref)
      << "the bytes of the embedded defaults";
  // Back to zero: no worker in the pool, no Burst job in Slurm.
  EXPECT_TRUE(
      WaitUntil([&] { return b.Send("GET", "/v1/workers").body.value("data", Json::array()).empty(); }, 60))
      << b.Send("GET", "/v1/workers").raw;
  EXPECT_TRUE(WaitUntil([&] { return LiveSlurmJobs().empty(); }, 30)) << LiveSlurmJobs();
}

// The same on Slurm with the store in a bucket: the loop's workers are
// Slurm jobs that see none of the control planes' folders.
TEST_F(FailoverTest, OnSlurmS3AndPostgresTheStandbyTakesTheTrainingLoopsOver) {
  TestSlurm slurm;
  const std::string slurm_failed = slurm.Start();
  ASSERT_TRUE(slurm_failed.empty()) << slurm_failed;
  S3TestService s3;
  Status started = s3.Start(7880);
  ASSERT_TRUE(started.ok()) << started.ToString();
  ASSERT_EQ(CreateDatabase("slurm_loops"), "");
  std::vector<std::string> flags = kFlags;
  flags.insert(
      flags.end(),
      {"--executor", "slurm", "--store", "s3://burst-test/failover-loops-" + std::to_string(::getpid()),
       "--s3-endpoint", std::getenv("BURST_TEST_S3_ENDPOINT"), "--worker-exe", BlindWorkerExe(slurm.dir())});
  for (const std::string& f : WorkerEnvFlags()) flags.push_back(f);
  LoopsSurviveTheActiveDying(Database("slurm_loops"), flags);
}

}  // namespace
}  // namespace burst::e2e
