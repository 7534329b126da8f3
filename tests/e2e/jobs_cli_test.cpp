// End-to-end tests of `burst jobs|logs|workers|usage`: the real binary as a
// client of a real `burst serve`, whose workers train the shipped model.
#include <gtest/gtest.h>

#include <regex>

#include "e2e_util.h"

namespace burst::e2e {
namespace {

class JobsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = MakeTempDir("burst-e2e-jobs");
    server_ = std::make_unique<Process>(std::vector<std::string>{
        BurstBinary(), "serve", "--data", (data_ / "data").string(), "--listen", "127.0.0.1:0", "--slots",
        "1", "--threads-per-slot", "1", "--scaledown-window", "1"});
    std::regex listening("listening on (http://127\\.0\\.0\\.1:[0-9]+)");
    std::smatch m;
    std::string out;
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         std::chrono::steady_clock::now() < deadline;
         std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
      out = server_->StdoutSoFar();
      if (std::regex_search(out, m, listening)) break;
      ASSERT_TRUE(server_->Running()) << server_->Wait(1).Describe();
    }
    ASSERT_TRUE(std::regex_search(out, m, listening)) << "burst serve did not start:\n" << out;
    url_ = m[1];
    key_ = Slurp(data_ / "data" / "admin.key");
    while (!key_.empty() && key_.back() == '\n') key_.pop_back();
    WriteHead(SupportValid(), data_ / "train.jsonl", 24);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(data_);
  }

  ProcResult Burst(std::vector<std::string> args, double timeout_s = 300) {
    args.insert(args.end(), {"--url", url_, "--api-key", key_});
    return RunBurst(args, timeout_s);
  }

  fs::path data_;
  std::unique_ptr<Process> server_;
  std::string url_, key_;
};

TEST_F(JobsCliTest, CreateWaitInspectAndFail) {
  // A local file is uploaded first; --wait follows the job to its end.
  ProcResult run = Burst({"jobs", "create", "--model", "burst-small", "--training-file",
                          (data_ / "train.jsonl").string(), "--n-epochs", "1", "--batch-size", "4",
                          "--checkpoint-every", "3", "--metadata", "team=e2e", "--wait"});
  ASSERT_TRUE(run.ok()) << run.Describe();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.out, m, std::regex("job (ftjob-[a-z0-9]+) succeeded"))) << run.out;
  const std::string id = m[1];
  EXPECT_TRUE(Contains(run.out, "train.jsonl as file-")) << run.out;
  EXPECT_TRUE(Contains(run.out, "fine_tuned_model  " + id + ":step-6")) << run.out;
  EXPECT_TRUE(Contains(run.out, "final train loss")) << run.out;
  EXPECT_TRUE(Contains(run.out, "step 6/6")) << run.out;  // not a terminal: plain progress lines

  ProcResult list = Burst({"jobs", "list"});
  ASSERT_TRUE(list.ok()) << list.Describe();
  EXPECT_TRUE(
      std::regex_search(list.out, std::regex(id + " +succeeded +burst-small .* 6/6 +" + id + ":step-6")))
      << list.out;
  ProcResult get = Burst({"jobs", "get", id});
  ASSERT_TRUE(get.ok()) << get.Describe();
  EXPECT_TRUE(std::regex_search(get.out, std::regex("\n1 +wrk-[a-z0-9]+ +completed "))) << get.out;
  ProcResult get_json = Burst({"jobs", "get", id, "--json"});
  ASSERT_TRUE(get_json.ok()) << get_json.Describe();
  EXPECT_EQ(Json::parse(get_json.out)["metadata"], Json({{"team", "e2e"}}));

  // Events page oldest first, whatever the page size.
  ProcResult small = Burst({"jobs", "events", id, "--limit", "3", "--json"});
  ProcResult big = Burst({"jobs", "events", id, "--limit", "100", "--json"});
  ASSERT_TRUE(small.ok()) << small.Describe();
  ASSERT_TRUE(big.ok()) << big.Describe();
  Json events = Json::parse(big.out)["data"];
  EXPECT_GT(events.size(), 6u);
  EXPECT_EQ(Json::parse(small.out)["data"], events);
  EXPECT_LE(events.front()["created_at"], events.back()["created_at"]);
  ProcResult checkpoints = Burst({"jobs", "checkpoints", id});
  ASSERT_TRUE(checkpoints.ok()) << checkpoints.Describe();
  EXPECT_TRUE(Contains(checkpoints.out, id + ":step-3")) << checkpoints.out;
  EXPECT_TRUE(Contains(checkpoints.out, "train_loss=")) << checkpoints.out;

  // Logs stay readable once the worker has left (scaledown window 1 s).
  ProcResult workers;
  for (int i = 0; i < 100; ++i) {
    workers = Burst({"workers"});
    if (Contains(workers.out, "0 workers (idle pool)")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(Contains(workers.out, "0 workers (idle pool)")) << workers.Describe();
  ProcResult logs = Burst({"logs", id, "-f"}, 60);
  ASSERT_TRUE(logs.ok()) << logs.Describe();
  EXPECT_GT(Lines(logs.out).size(), 6u) << logs.out;
  ProcResult usage = Burst({"usage"});
  ASSERT_TRUE(usage.ok()) << usage.Describe();
  EXPECT_TRUE(
      std::regex_search(usage.out, std::regex("training +(serverless|dedicated) +[0-9.]+ +[0-9-]+ +[0-9.]+")))
      << usage.out;
  EXPECT_TRUE(Contains(usage.out, "total")) << usage.out;

  // Errors: one line naming the problem, exit code 1.
  ProcResult cancel = Burst({"jobs", "cancel", id});
  EXPECT_EQ(cancel.exit_code, 1) << cancel.Describe();
  EXPECT_TRUE(Contains(cancel.err, "already succeeded")) << cancel.Describe();
  ProcResult missing = Burst({"jobs", "get", "ftjob-nosuchjob"});
  EXPECT_EQ(missing.exit_code, 1) << missing.Describe();
  EXPECT_TRUE(Contains(missing.err, "ftjob-nosuchjob")) << missing.Describe();
  fs::path recipe = data_ / "short.json";
  WriteJsonFile(recipe, {{"max_seq_len", 8}, {"truncate", false}});
  ProcResult failed = Burst({"jobs", "create", "--model", "burst-small", "--training-file",
                             (data_ / "train.jsonl").string(), "--recipe", recipe.string(), "--wait"});
  EXPECT_EQ(failed.exit_code, 1) << failed.Describe();
  EXPECT_TRUE(std::regex_search(failed.out, std::regex("job ftjob-[a-z0-9]+ failed"))) << failed.out;
  EXPECT_TRUE(Contains(failed.out, "error             invalid_argument: ")) << failed.out;
  EXPECT_TRUE(Contains(failed.out, "max_seq_len 8")) << failed.out;
}

}  // namespace
}  // namespace burst::e2e
