// `burst serve --executor slurm` against a real single-node Slurm that this
// test starts (tests/slurm/slurm-up.sh): the pool scales from zero with
// real `burst worker`s running as Slurm batch jobs, a job trains to the
// same bytes as on the local executor, and the pool (and Slurm's queue)
// goes back to zero.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>

#include "core/fs.h"
#include "core/subprocess.h"
#include "e2e_http.h"

namespace burst::e2e {
namespace {

const std::vector<std::string> kFlags = {"--slots", "1", "--threads-per-slot", "1", "--scaledown-window", "2",
                                         "--lease-ttl", "5"};
constexpr int64_t kSteps = 6;

Json Spec(const std::string& file) {
  return {{"model", "burst-small"},
          {"training_file", file},
          {"seed", 11},
          {"recipe", {{"max_steps", kSteps}, {"batch_size", 4}, {"checkpoint_every", 3}, {"max_seq_len", 128}}}};
}

// Burst's jobs in Slurm's queue that have not ended, one "name STATE" a line.
std::string LiveSlurmJobs() {
  auto r = RunCommand({"squeue", "--noheader", "--format=%j %T"}, 10'000);
  if (!r.ok()) return "(squeue: " + r.status().ToString() + ")";
  return r.value().out;
}

// Submits the spec, waits for the job to end; the job, or null.
Json RunJob(const ServeProcess& s, const std::string& file, const std::function<void()>& while_running = {}) {
  Resp created = s.Send("POST", "/v1/fine_tuning/jobs", Spec(file));
  EXPECT_EQ(created.status, 200) << created.Describe();
  if (created.status != 200) return Json();
  const std::string id = created.body["id"];
  bool saw_running = false;
  Json job;
  WaitUntil(
      [&] {
        job = s.Send("GET", "/v1/fine_tuning/jobs/" + id).body;
        const std::string st = job.value("status", "");
        if (st == "running" && !saw_running && while_running) {
          saw_running = true;
          while_running();
        }
        return st == "succeeded" || st == "failed" || st == "cancelled";
      },
      300, 200);
  return job;
}

std::string AdapterSha(const ServeProcess& s, const Json& job) {
  const fs::path f = s.dir() / "data" / "store" / "objects" / "orgs" / job["organization_id"].get<std::string>() /
                     "jobs" / job["id"].get<std::string>() / "checkpoints" / "step-00000006" / "sampler" /
                     "adapter_model.safetensors";
  return fs::is_regular_file(f) ? Sha256File(f) : "(missing " + f.string() + ")";
}

class SlurmE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    slurm_dir_ = new TempDir("burst-e2e-slurm");
    auto r = RunCommand({(SourceDir() / "tests/slurm/slurm-up.sh").string(), (slurm_dir_->path() / "slurm").string()},
                        60'000);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r.value().exit_code, 0) << r.value().out << r.value().err;
    ::setenv("SLURM_CONF", (slurm_dir_->path() / "slurm" / "slurm.conf").c_str(), 1);
  }
  static void TearDownTestSuite() {
    (void)RunCommand({(SourceDir() / "tests/slurm/slurm-down.sh").string(), (slurm_dir_->path() / "slurm").string()},
                     60'000);  // best effort: the folder goes next
    delete slurm_dir_;
  }
  static TempDir* slurm_dir_;
};
TempDir* SlurmE2eTest::slurm_dir_ = nullptr;

TEST_F(SlurmE2eTest, AJobRunsOnSlurmWorkersToTheSameBytesAndThePoolGoesToZero) {
  // The reference: the same job on the local executor.
  std::string local_sha;
  {
    ServeProcess local("burst-e2e-slurm-local", kFlags);
    ASSERT_TRUE(local.error().empty()) << local.error();
    Json job = RunJob(local, local.Upload(SupportTrain()));
    ASSERT_EQ(job.value("status", ""), "succeeded") << job.dump() << local.Output();
    local_sha = AdapterSha(local, job);
  }

  std::vector<std::string> flags = kFlags;
  flags.insert(flags.end(), {"--executor", "slurm"});
  ServeProcess s("burst-e2e-slurm-serve", flags);
  ASSERT_TRUE(s.error().empty()) << s.error();
  EXPECT_NE(s.Output().find("workers run as Slurm jobs"), std::string::npos) << s.Output();
  EXPECT_EQ(LiveSlurmJobs(), "") << "nothing runs before there is work";
  const std::string file = s.Upload(SupportTrain());
  ASSERT_FALSE(file.empty());

  std::string during, workers_during;
  Json job = RunJob(s, file, [&] {
    during = LiveSlurmJobs();
    workers_during = s.Send("GET", "/v1/workers").raw;
  });
  ASSERT_EQ(job.value("status", ""), "succeeded") << job.dump() << s.Output();
  EXPECT_NE(during.find("burst-wrk-"), std::string::npos) << during;
  EXPECT_NE(during.find("RUNNING"), std::string::npos) << during;
  EXPECT_NE(workers_during.find("wrk-"), std::string::npos) << workers_during;
  EXPECT_EQ(AdapterSha(s, job), local_sha) << "the same bytes as on the local executor";

  // Back to zero: no worker in the pool and no Burst job left in Slurm.
  EXPECT_TRUE(WaitUntil([&] { return s.Send("GET", "/v1/workers").body.value("data", Json::array()).empty(); }, 60))
      << s.Send("GET", "/v1/workers").raw;
  EXPECT_TRUE(WaitUntil([&] { return LiveSlurmJobs().empty(); }, 30)) << LiveSlurmJobs();
}

}  // namespace
}  // namespace burst::e2e
