// `burst train --members N --rank R --exchange ...`: two real
// `burst train` processes train one run as one process with grad_accum 2
// does, through the storage channel on a folder and through c10d Gloo; bad
// member flags are named before anything is trained.
#include <gtest/gtest.h>

#include "e2e_util.h"

namespace burst::e2e {
namespace {

class TrainMembersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ProcResult init = InitTinyModel(tmp_ / "model");
    ASSERT_TRUE(init.ok()) << init.Describe();
    WriteSupportSubset(tmp_.path(), 32, 8);
  }
  fs::path Recipe(int grad_accum) {
    const fs::path p = tmp_ / ("recipe-" + std::to_string(grad_accum) + ".json");
    WriteJsonFile(p, {{"model", (tmp_ / "model").string()},
                      {"train_file", (tmp_ / "train.jsonl").string()},
                      {"method", "lora"},
                      {"lora", {{"rank", 4}, {"alpha", 8}, {"dropout", 0.1}}},
                      {"batch_size", 2},
                      {"grad_accum", grad_accum},
                      {"max_steps", 3},
                      {"seed", 5},
                      {"threads", 1}});
    return p;
  }
  static std::vector<double> Losses(const fs::path& run) {
    std::vector<double> out;
    for (const Json& l : ReadJsonLines(run / "metrics.jsonl")) {
      if (l.value("type", "") == "train") out.push_back(l["train_loss"].get<double>());
    }
    return out;
  }
  TempDir tmp_{"burst-e2e-members"};
};

TEST_F(TrainMembersTest, TwoProcessesTrainAsOneWithGradAccumTwo) {
  ProcResult one = RunBurst({"train", "--config", Recipe(2).string(), "--out", (tmp_ / "one").string()});
  ASSERT_TRUE(one.ok()) << one.Describe();
  const std::vector<double> want = Losses(tmp_ / "one");
  ASSERT_EQ(want.size(), 3u);
  const std::vector<std::string> exchanges = {"store:file://" + (tmp_ / "channel").string(),
                                              "gloo:" + (tmp_ / "address").string()};
  for (const std::string& exchange : exchanges) {
    SCOPED_TRACE(exchange);
    const std::string name = exchange.substr(0, exchange.find(':'));
    std::vector<std::unique_ptr<Process>> members;
    for (int rank = 0; rank < 2; ++rank) {
      members.push_back(std::make_unique<Process>(
          std::vector<std::string>{BurstBinary(), "train", "--config", Recipe(1).string(), "--out",
                                   (tmp_ / (name + "-" + std::to_string(rank))).string(), "--members", "2",
                                   "--rank", std::to_string(rank), "--exchange", exchange}));
    }
    for (int rank = 0; rank < 2; ++rank) {
      ProcResult r = members[static_cast<size_t>(rank)]->Wait(kDefaultTimeoutS);
      ASSERT_TRUE(r.ok()) << "member " << rank << ": " << r.Describe();
      const std::vector<double> got = Losses(tmp_ / (name + "-" + std::to_string(rank)));
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(NearRel(got[i], want[i], 1e-5)) << got[i] << " " << want[i];
    }
  }
}

TEST_F(TrainMembersTest, BadMemberFlagsAreNamed) {
  const std::string recipe = Recipe(1).string(), channel = "store:file://" + (tmp_ / "channel").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--members", "2", "--rank", "2", "--exchange", channel}, "--rank"},
      {{"--members", "2", "--exchange", "carrier-pigeon:x"}, "--exchange"},
      {{"--members", "2", "--exchange", "store:"}, "--exchange"},
      {{"--members", "1", "--exchange", channel}, "--members"},
  };
  for (const auto& [flags, named] : cases) {
    std::vector<std::string> args = {"train", "--config", recipe, "--out", (tmp_ / "bad").string()};
    args.insert(args.end(), flags.begin(), flags.end());
    ProcResult r = RunBurst(args);
    EXPECT_NE(r.exit_code, 0) << r.Describe();
    EXPECT_TRUE(Contains(r.err, named)) << "stderr lacks " << named << "\n" << r.Describe();
    EXPECT_FALSE(fs::exists(tmp_ / "bad" / "metrics.jsonl")) << "a refused run trained";
  }
}

}  // namespace
}  // namespace burst::e2e
