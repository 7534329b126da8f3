// One job on many workers, end to end: a real `burst serve`
// with two slots starts two real `burst worker`s together for a job with
// "workers": 2, which exchange gradients through c10d Gloo or through the
// store channel on the server's store. The gang trains as one worker with
// grad_accum 2 (losses to 1e-5); killing one member mid-run loses the
// attempt, and the requeued gang resumes from rank 0's last state
// checkpoint to the clean gang run's exact weights. The fixture is in
// jobs_fixture.h. CTest runs it locally on a file:// store, and again with
// the workers on a real Slurm (the gang one allocation, each worker a job
// step) and the store, channel included, on a real radosgw
// (e2e_gang_on_slurm_test: BURST_E2E_EXECUTOR=slurm BURST_E2E_STORE=s3).
#include <csignal>

#include "jobs_fixture.h"

namespace burst::e2e::jobs {
namespace {

const ::testing::Environment* const kExecutor = ::testing::AddGlobalTestEnvironment(new E2eExecutor);

constexpr int64_t kSteps = 60;

Json GangSpec(const std::string& file, int64_t workers, const std::string& communication,
              int64_t grad_accum) {
  Json s = Spec(file, kSteps, {{"checkpoint_every", 5}, {"grad_accum", grad_accum}});
  s["seed"] = 7;
  if (workers > 1) {
    s["workers"] = workers;
    s["communication"] = communication;
  }
  return s;
}

class GangTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static Server& S() {
    if (!server_) {
      auto s = std::make_unique<Server>(std::vector<std::string>{"--slots", "2", "--threads-per-slot", "1",
                                                                 "--scaledown-window", "5", "--lease-ttl",
                                                                 "3", "--member-timeout", "30"});
      s->Start();
      file_ = s->Upload("support-train.jsonl", Slurp(SupportTrain()));
      server_ = s.release();
    }
    return *server_;
  }

  struct Run {
    Json job, events;
    std::map<int64_t, double> losses;
    std::map<std::string, std::string> weights;
  };
  // Runs the job to its end; fails the test unless it succeeded.
  static Run Finish(const std::string& id) {
    Run r;
    r.job = S().WaitJob(id, 300);
    EXPECT_EQ(r.job.value("status", ""), "succeeded") << S().Diagnose(id);
    r.job = S().WaitAttemptsSettled(id);
    r.events = S().Events(id);
    r.losses = TrainLosses(r.events);
    r.weights = FinalWeights(S(), r.job, kSteps);
    for (const auto& [file, sha] : r.weights) EXPECT_EQ(sha.size(), 64u) << file << ": " << sha;
    return r;
  }
  // The clean runs, each once: one worker with grad_accum 2, and the gang
  // over each communication.
  static const Run& Clean(const std::string& communication) {
    auto it = clean_.find(communication);
    if (it == clean_.end()) {
      if (communication == "c10d") {
        // From an empty pool, so both workers start for it (together).
        EXPECT_TRUE(WaitUntil([] { return S().Workers()["data"].empty(); }, 90)) << S().Workers().dump();
      }
      const std::string id = S().Submit(
          GangSpec(file_, communication == "one" ? 1 : 2, communication, communication == "one" ? 2 : 1));
      it = clean_.emplace(communication, Finish(id)).first;
    }
    return it->second;
  }

  // Rank 1's worker (from /v1/workers) once the job runs at `step` or
  // later; null when the job ended first or 120 s passed.
  static Json RankOne(const std::string& id, int64_t step) {
    Json member;
    WaitUntil(
        [&] {
          Json j = S().Job(id);
          if (Terminal(j.value("status", ""))) return true;
          if (j["status"] != "running" || j.value("step", int64_t{0}) < step || j["attempts"].empty())
            return false;
          const Json rank0 = j["attempts"].back()["worker"];
          const Json pool = S().Workers();  // kept: its "data" is iterated
          for (const Json& w : pool["data"]) {
            if (w["job"].is_string() && w["job"] == id && w["id"] != rank0) member = w;
          }
          return member.is_object();
        },
        120, 20);
    return member;
  }

  inline static Server* server_ = nullptr;
  inline static std::string file_;
  inline static std::map<std::string, Run> clean_;
};

// The gang's workers were started together; on Slurm as one allocation,
// one job of both workers' CPUs, whose steps were the workers.
void StartedTogether(const Json& events) {
  std::string started;
  for (const Json& e : events)
    if (Contains(e.value("message", ""), "Starting workers ")) started = e["message"];
  ASSERT_TRUE(Contains(started, " together")) << "no start of both workers together: " << events.dump();
  if (!E2eExecutor::OnSlurm()) return;
  const std::string mark = "as one Slurm allocation (job ";
  const size_t at = started.find(mark);
  ASSERT_NE(at, std::string::npos) << started;
  const std::string slurm_job = started.substr(at + mark.size(), started.find(',', at) - at - mark.size());
  auto q =
      RunCommand({"squeue", "--noheader", "--states=all", "--jobs=" + slurm_job, "--format=%j|%C"}, 10'000);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const std::string line = Trim(q.value().out);
  EXPECT_EQ(line.rfind("burst-gang-wrk-", 0), 0u) << line;
  EXPECT_EQ(line.size() > 2 ? line.substr(line.size() - 2) : line, "|2") << "both workers' CPUs: " << line;
}

void ExpectNear(const std::map<int64_t, double>& got, const std::map<int64_t, double>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), static_cast<size_t>(kSteps)) << what;
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps)) << what;
  for (const auto& [step, loss] : want) {
    EXPECT_NEAR(got.at(step), loss, 1e-5 * std::abs(loss)) << what << ": step " << step;
  }
}

TEST_F(GangTest, TwoWorkersTrainAsOneWorkerWithGradAccumTwoOverC10dAndTheStore) {
  const Run& one = Clean("one");
  for (const std::string communication : {"c10d", "store"}) {
    SCOPED_TRACE(communication);
    const Run& gang = Clean(communication);
    const std::string id = gang.job["id"];
    ExpectNear(gang.losses, one.losses, communication + " against one worker with grad_accum 2");
    EXPECT_EQ(gang.job["workers"], 2) << gang.job.dump();
    EXPECT_EQ(gang.job["communication"], communication);
    ASSERT_EQ(gang.job["attempts"].size(), 1u) << S().Diagnose(id);
    EXPECT_EQ(gang.job["total_steps"], kSteps);
    // The events tell the gang's story: both workers assigned at once, the
    // rendezvous (c10d), the exchange per step, each member's share.
    EXPECT_TRUE(AnyMessage(gang.events, "(rank 0)") && AnyMessage(gang.events, "(rank 1)"))
        << S().Diagnose(id);
    if (communication == "c10d") {
      EXPECT_TRUE(AnyMessage(gang.events, "Rendezvous: rank 0")) << S().Diagnose(id);
    }
    EXPECT_TRUE(AnyMessage(gang.events, "rank 1 of 2 on worker")) << S().Diagnose(id);
    if (communication == "c10d") StartedTogether(gang.events);
    EXPECT_TRUE(AnyMessage(gang.events, "% of the gang's")) << S().Diagnose(id);
    int with_exchange = 0;
    for (const Json& e : gang.events) {
      with_exchange +=
          e.value("type", "") == "metrics" && e["data"].is_object() && e["data"].contains("exchange_s");
    }
    EXPECT_EQ(with_exchange, kSteps) << "one metrics event a step (rank 0's), each with its exchange time";
    // Checkpoints are written once, by rank 0.
    Json cks = S().GetOk("/v1/fine_tuning/jobs/" + id + "/checkpoints?limit=100")["data"];
    EXPECT_EQ(cks.size(), static_cast<size_t>(kSteps / 5)) << cks.dump();
    // Both workers' time is the job's.
    EXPECT_GT(gang.job["usage"]["seconds"].get<double>(), 0.0);
  }
}

// On Slurm (e2e_gang_on_slurm_test) the store channel's case alone: what
// Slurm adds, the member's step ending, is the same for both, and the
// suite sits on make test's longest chain.
TEST_F(GangTest, KillingAMemberRequeuesTheGangAndItResumesToTheCleanRunsWeights) {
  const std::vector<std::string> communications =
      E2eExecutor::OnSlurm() ? std::vector<std::string>{"store"} : std::vector<std::string>{"c10d", "store"};
  for (const std::string& communication : communications) {
    SCOPED_TRACE(communication);
    const Run& clean = Clean(communication);
    Server& s = S();
    const std::string id = s.Submit(GangSpec(file_, 2, communication, 1));
    // After the first checkpoint, so the requeued gang resumes from it.
    const Json member = RankOne(id, 6);
    ASSERT_TRUE(member.is_object()) << "rank 1 not seen running at step 6" << s.Diagnose(id);
    ASSERT_LT(s.Job(id).value("step", int64_t{0}), kSteps) << "too late to kill";
    ::kill(static_cast<pid_t>(member["pid"].get<int64_t>()), SIGKILL);

    Run r = Finish(id);
    const std::vector<std::string> outcomes = Outcomes(r.job);
    ASSERT_GE(outcomes.size(), 2u) << s.Diagnose(id);
    // Whoever noticed first: the control plane (its exit) or rank 0 (its
    // exchange failed).
    EXPECT_TRUE(outcomes.front() == "lost" || outcomes.front() == "failed")
        << Join(outcomes) << s.Diagnose(id);
    EXPECT_EQ(outcomes.back(), "completed") << s.Diagnose(id);
    EXPECT_GE(r.job["attempts"].back()["resumed_from_step"].get<int64_t>(), 5) << s.Diagnose(id);
    for (const auto& [file, sha] : clean.weights) {
      EXPECT_EQ(r.weights.at(file), sha) << file << " differs from the clean " << communication << " gang's";
    }
    ExpectNear(r.losses, clean.losses, "after the kill");
    for (const auto& [step, loss] : clean.losses) EXPECT_EQ(r.losses.at(step), loss) << "step " << step;
  }
}

// SIGTERM to one member (a preemption): its stop is a vote in the next
// exchange, so the whole gang stops after that step, rank 0 writes the
// state checkpoint there, and the requeued gang (no retry spent) resumes
// from it to the clean run's weights.
TEST_F(GangTest, PreemptingAMemberStopsTheGangAtOneStepAndItResumesThere) {
  const Run& clean = Clean("c10d");
  Server& s = S();
  const std::string id = s.Submit(GangSpec(file_, 2, "c10d", 1));
  const Json member = RankOne(id, 3);
  ASSERT_TRUE(member.is_object()) << "rank 1 not seen running" << s.Diagnose(id);
  ::kill(static_cast<pid_t>(member["pid"].get<int64_t>()), SIGTERM);
  Run r = Finish(id);
  ASSERT_EQ(Outcomes(r.job), (std::vector<std::string>{"preempted", "completed"})) << s.Diagnose(id);
  const int64_t resumed = r.job["attempts"][1]["resumed_from_step"].get<int64_t>();
  EXPECT_GT(resumed, 3) << s.Diagnose(id);
  for (const auto& [file, sha] : clean.weights) {
    EXPECT_EQ(r.weights.at(file), sha) << file << " differs from the clean gang's";
  }
  for (const auto& [step, loss] : clean.losses) EXPECT_EQ(r.losses.at(step), loss) << "step " << step;
}

// The estimate for several worker counts, after the gangs above ran: the
// exchange is fitted to this organisation's own gang jobs, the compute and
// overhead measured, N over the slots flagged, and nothing is created.
TEST_F(GangTest, TheEstimateForEachWorkerCountIsFittedToTheGangsThatRan) {
  Clean("one");
  Clean("c10d");
  Server& s = S();
  const size_t before = s.GetOk("/v1/fine_tuning/jobs?limit=100")["data"].size();
  Json body = GangSpec(file_, 1, "c10d", 1);
  body["communication"] = "c10d";
  body["workers"] = {1, 2, 4};
  Resp e = s.Post("/v1/fine_tuning/jobs/estimate", body);
  ASSERT_EQ(e.status, 200) << e.Describe();
  const Json& by = e.body["by_workers"];
  ASSERT_EQ(by.size(), 3u) << e.raw;
  EXPECT_EQ(by[0]["exchange_per_step_s"], 0.0);
  EXPECT_TRUE(Contains(by[1]["exchange_source"], "fitted")) << by[1].dump();
  EXPECT_TRUE(Contains(by[1]["tokens_per_second_source"], "measured")) << by[1].dump();
  EXPECT_TRUE(Contains(by[1]["overhead_source"], "measured")) << by[1].dump();
  EXPECT_GT(by[2]["exchange_per_step_s"].get<double>(), by[1]["exchange_per_step_s"].get<double>());
  EXPECT_EQ(by[2]["over_slots"], true);
  EXPECT_EQ(by[1]["over_slots"], false);
  // A max_steps job: the same steps on every N, each feeding N x the sequences.
  EXPECT_EQ(by[1]["total_steps"], by[0]["total_steps"]);
  EXPECT_EQ(by[1]["sequences"].get<int64_t>(), 2 * by[0]["sequences"].get<int64_t>());
  EXPECT_NEAR(by[1]["cost_if_dedicated"].get<double>(), 2 * by[1]["seconds"].get<double>() * 0.18 / 3600,
              1e-12)
      << "two slots' time";
  EXPECT_TRUE(e.body["fastest_workers"].is_number() && e.body["cheapest_workers"].is_number()) << e.raw;
  body["workers"] = {1, 0};
  ExpectError(s.Post("/v1/fine_tuning/jobs/estimate", body), 400, "invalid_argument", "workers");
  EXPECT_EQ(s.GetOk("/v1/fine_tuning/jobs?limit=100")["data"].size(), before);
}

TEST_F(GangTest, BadGangsAreRefusedByFieldAndCreateNothing) {
  Server& s = S();
  const size_t before = s.GetOk("/v1/fine_tuning/jobs?limit=100")["data"].size();
  Json three = GangSpec(file_, 3, "c10d", 1);
  ExpectError(s.Post("/v1/fine_tuning/jobs", three), 400, "invalid_argument", "workers", "at most 2 workers");
  Json zero = GangSpec(file_, 1, "", 1);
  zero["workers"] = 0;
  ExpectError(s.Post("/v1/fine_tuning/jobs", zero), 400, "invalid_argument", "workers");
  Json mpi = GangSpec(file_, 2, "mpi", 1);
  ExpectError(s.Post("/v1/fine_tuning/jobs", mpi), 400, "invalid_argument", "communication");
  Json text = GangSpec(file_, 2, "store", 1);
  text["workers"] = "two";
  ExpectError(s.Post("/v1/fine_tuning/jobs", text), 400, "invalid_argument", "workers");
  EXPECT_EQ(s.GetOk("/v1/fine_tuning/jobs?limit=100")["data"].size(), before);
}

}  // namespace
}  // namespace burst::e2e::jobs
