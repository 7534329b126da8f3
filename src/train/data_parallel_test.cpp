// One run on two members (TrainOptions::data_parallel): two
// real processes (this test binary again, each running one member's test
// below), summing their gradients through the storage channel on a folder
// or through c10d Gloo, train as one process with grad_accum 2: the same
// losses and weights to 1e-5, dropout included, and both members' weights
// bit for bit the same.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "core/fs.h"
#include "core/subprocess.h"
#include "model/safetensors.h"
#include "parallel/gloo_group.h"
#include "parallel/store_channel.h"
#include "train/test_files.h"
#include "train/test_util.h"
#include "train/trainer.h"

extern char** environ;

namespace burst {
namespace {

const char* kRecipe =
    R"({"threads": 1, "device": "cpu", "learning_rate": 0.01, "max_steps": 4, "batch_size": 2,
                          "lora": {"rank": 4, "alpha": 8, "dropout": 0.1}})";

Recipe MakeRecipe(const fs::path& dir, int64_t grad_accum) {
  Json j = Json::parse(kRecipe);
  j["model"] = (dir / "model").string();
  j["train_file"] = (dir / "train.jsonl").string();
  j["grad_accum"] = grad_accum;
  if (fs::exists(dir / "valid.jsonl")) j["valid_file"] = (dir / "valid.jsonl").string();
  return Recipe::Parse(j, dir, "recipe");
}

std::vector<double> Losses(const fs::path& run) {
  std::vector<double> out;
  std::istringstream in(ReadFile(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line);
    if (j["type"] == "train") out.push_back(j["train_loss"].get<double>());
  }
  return out;
}

// Rank 0's rendezvous address, passed through a file (what the control
// plane's lease does for workers).
std::string AwaitAddress(const fs::path& file) {
  for (int i = 0; i < 6000 && !fs::exists(file); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return ReadFile(file);
}

// A member's side, run by the tests below in a process of its own (skipped
// when run any other way): BURST_DP_DIR holds the model, the data and the
// channel's folder; BURST_DP_CHANNEL is "store", "gloo" or "gloo-tensor".
void RunMember(int rank) {
  const char* dir_env = std::getenv("BURST_DP_DIR");
  if (dir_env == nullptr) GTEST_SKIP() << "a member of the DataParallel tests";
  const fs::path dir = dir_env;
  const std::string channel = std::getenv("BURST_DP_CHANNEL");
  TrainOptions opt;
  std::optional<StoreChannel> store_channel;
  std::unique_ptr<ObjectStore> store;
  std::unique_ptr<GlooGroup> gloo;
  if (channel == "store") {
    auto s = NewFileStore(dir / "channel");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store = std::move(s.value());
    auto ch = StoreChannel::Open(store.get(), {"run/", rank, 2, 120'000});
    ASSERT_TRUE(ch.ok()) << ch.status().ToString();
    store_channel.emplace(std::move(ch.value()));
    opt.data_parallel = TrainOptions::DataParallel{
        rank, 2, [&](std::vector<float>& flat) { return store_channel->AllReduceSum(flat); }, true};
  } else {
    GlooOptions go;
    go.rank = rank;
    go.size = 2;
    go.timeout_ms = 120'000;
    auto g = rank == 0 ? GlooGroup::Listen(go) : GlooGroup::Join(AwaitAddress(dir / "address"), go);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    gloo = std::move(g.value());
    if (rank == 0) WriteFileAtomic(dir / "address", gloo->address());
    ASSERT_TRUE(gloo->Connect().ok());
    opt.data_parallel = TrainOptions::DataParallel{
        rank, 2, [&](std::vector<float>& flat) { return gloo->AllReduceSum(flat); }, true};
    // "gloo-tensor": the gradients as one tensor on the run's device (the
    // path a gang on GPUs takes with NCCL).
    if (channel == "gloo-tensor")
      opt.data_parallel->all_reduce_device = [&](torch::Tensor& flat) { return gloo->AllReduceSum(flat); };
  }
  // BURST_DP_STOP: member 1 asks to stop once it has seen step 2; only
  // rank 0 writes checkpoints.
  const bool stop = std::getenv("BURST_DP_STOP") != nullptr;
  int64_t seen = 0;
  if (stop) {
    opt.data_parallel->all_write_checkpoints = false;
    opt.on_metrics = [&](const Json& line) { seen = std::max(seen, line.value("step", int64_t{0})); };
    opt.should_stop = [&] { return rank == 1 && seen >= 2; };
  }
  // BURST_DP_AVERAGE=K: model averaging every K steps.
  if (const char* k = std::getenv("BURST_DP_AVERAGE")) opt.data_parallel->average_every = std::atoi(k);
  TrainResult res = Train(MakeRecipe(dir, 1), dir / ("member-" + std::to_string(rank)), opt);
  // The vote rides in step 3's all-reduce: both stop after it.
  EXPECT_EQ(res.step, stop ? 3 : 4);
  EXPECT_EQ(res.interrupted, stop);
}

TEST(DataParallelMember, Rank0) { RunMember(0); }
TEST(DataParallelMember, Rank1) { RunMember(1); }

std::string SelfExe() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).string();
}

fs::path MakeRunDir() {
  const fs::path dir = MakeTempDir("burst-dp-");
  testing::MakeTinyModel(dir / "model");
  testing::WriteLines(dir / "train.jsonl", testing::HeadLines("examples/support/train.jsonl", 24));
  return dir;
}

// Runs the two members' processes over `channel` in `dir`; false (with the
// failures reported) when either did not pass.
bool RunMembers(const fs::path& dir, const std::string& channel, bool stop = false, int average_every = 0) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.push_back("BURST_DP_DIR=" + dir.string());
  env.push_back("BURST_DP_CHANNEL=" + channel);
  if (stop) env.push_back("BURST_DP_STOP=1");
  if (average_every > 0) env.push_back("BURST_DP_AVERAGE=" + std::to_string(average_every));
  std::vector<Result<CommandResult>> runs(2, Status(Code::kInternal, "not run"));
  std::vector<std::thread> members;
  for (int rank = 0; rank < 2; ++rank) {
    members.emplace_back([&, rank] {
      runs[static_cast<size_t>(rank)] = RunCommand(
          {SelfExe(), "--gtest_filter=DataParallelMember.Rank" + std::to_string(rank)}, 300'000, env);
    });
  }
  for (auto& t : members) t.join();
  bool ok = true;
  for (int rank = 0; rank < 2; ++rank) {
    const auto& r = runs[static_cast<size_t>(rank)];
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return false;
    EXPECT_EQ(r.value().exit_code, 0) << "member " << rank << ":\n" << r.value().out << r.value().err;
    EXPECT_NE(r.value().out.find("[  PASSED  ] 1 test"), std::string::npos) << r.value().out;
    ok = ok && r.value().exit_code == 0 && r.value().out.find("[  PASSED  ] 1 test") != std::string::npos;
  }
  return ok;
}

// Runs the two members over `channel`; checks them against one process
// with grad_accum 2 and returns member 0's final weights.
TensorMap TwoMembers(const std::string& channel) {
  const fs::path dir = MakeRunDir();
  Train(MakeRecipe(dir, 2), dir / "one");
  if (!RunMembers(dir, channel)) return {};
  const auto l1 = Losses(dir / "one"), l0 = Losses(dir / "member-0"), lm1 = Losses(dir / "member-1");
  EXPECT_EQ(l1.size(), 4u);
  EXPECT_EQ(l0.size(), l1.size());
  EXPECT_EQ(l0, lm1);  // the members report the step's whole loss
  for (size_t i = 0; i < l1.size() && i < l0.size(); ++i) {
    EXPECT_NEAR(l0[i], l1[i], 1e-5 * std::abs(l1[i])) << "step " << i + 1;
  }
  const fs::path state = "checkpoints/step-00000004/state/trainable.safetensors";
  TensorMap w1 = ReadSafetensors(dir / "one" / state);
  TensorMap w0 = ReadSafetensors(dir / "member-0" / state), wm1 = ReadSafetensors(dir / "member-1" / state);
  EXPECT_EQ(w0.size(), w1.size());
  for (auto& [name, t] : w1) {
    EXPECT_TRUE(torch::equal(w0.at(name), wm1.at(name))) << name << ": the members' weights differ";
    const double scale = std::max(t.abs().max().item<double>(), 1e-6);
    EXPECT_LT((t - w0.at(name)).abs().max().item<double>() / scale, 1e-5) << name;
  }
  fs::remove_all(dir);
  return w0;
}

TEST(DataParallel, TwoMembersOverTheStorageChannelTrainAsOneWithGradAccumTwo) { TwoMembers("store"); }

// One member's stop (a cancel, a preemption) stops both after the same
// step; rank 0 alone writes the state checkpoint there, and evaluates.
TEST(DataParallel, OneMembersStopStopsBothAfterTheSameStepAndRankZeroCheckpoints) {
  const fs::path dir = MakeRunDir();
  testing::WriteLines(dir / "valid.jsonl", testing::HeadLines("examples/support/train.jsonl", 4));
  ASSERT_TRUE(RunMembers(dir, "store", /*stop=*/true));
  auto evals = [](const fs::path& run) {
    std::istringstream in(ReadFile(run / "metrics.jsonl"));
    int n = 0;
    for (std::string line; std::getline(in, line);) n += Json::parse(line)["type"] == "eval";
    return n;
  };
  EXPECT_EQ(evals(dir / "member-0"), 1);  // the baseline
  EXPECT_EQ(evals(dir / "member-1"), 0);
  EXPECT_EQ(Losses(dir / "member-0").size(), 3u);
  EXPECT_EQ(Losses(dir / "member-1").size(), 3u);
  EXPECT_TRUE(fs::exists(dir / "member-0/checkpoints/step-00000003/state/manifest.json"));
  EXPECT_TRUE(!fs::exists(dir / "member-1/checkpoints") || fs::is_empty(dir / "member-1/checkpoints"))
      << "only rank 0 writes checkpoints";
  const Json st = Json::parse(ReadFile(dir / "member-0/checkpoints/step-00000003/state/state.json"));
  EXPECT_EQ(st.value("members", 0), 2);
  // Resuming it on one process is refused by name: the steps would differ.
  TrainOptions again;
  again.resume = true;
  try {
    Train(MakeRecipe(dir, 1), dir / "member-0", again);
    ADD_FAILURE() << "resumed a 2-member state on 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().param(), "workers") << e.status().ToString();
  }
  fs::remove_all(dir);
}

// Model averaging (MA-SGD) every 2 steps: each member steps on its own
// share, they meet at steps 2 and 4 (the last), and end with the same
// weights; the first step's loss (before any update) is BSP's.
TEST(DataParallel, ModelAveragingMembersMeetEveryKStepsAndEndIdentical) {
  const fs::path dir = MakeRunDir();
  Train(MakeRecipe(dir, 2), dir / "one");
  ASSERT_TRUE(RunMembers(dir, "store", false, 2));
  std::vector<bool> averaged;
  std::istringstream in(ReadFile(dir / "member-0/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line);
    if (j["type"] == "train") averaged.push_back(j.value("averaged", false));
  }
  EXPECT_EQ(averaged, (std::vector<bool>{false, true, false, true}));
  const auto one = Losses(dir / "one"), l0 = Losses(dir / "member-0"), l1 = Losses(dir / "member-1");
  ASSERT_EQ(l0.size(), 4u);
  EXPECT_EQ(l0, l1) << "the members report the gang's loss";
  EXPECT_NEAR(l0[0], one[0], 1e-5 * one[0]) << "step 1 starts from the same weights";
  EXPECT_NE(l0[3], one[3]) << "model averaging is not gradient averaging";
  const fs::path state = "checkpoints/step-00000004/state/";
  for (const char* f : {"trainable.safetensors", "optimizer.safetensors"}) {
    TensorMap a = ReadSafetensors(dir / "member-0" / state / f),
              b = ReadSafetensors(dir / "member-1" / state / f);
    for (auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << f << " " << name;
  }
  fs::remove_all(dir);
}

TEST(DataParallel, TwoMembersOverGlooTrainAsOneWithGradAccumTwoAndAsTheStorageChannel) {
  TensorMap gloo = TwoMembers("gloo");
  TensorMap store = TwoMembers("store");
  ASSERT_EQ(gloo.size(), store.size());
  for (auto& [name, t] : store) {
    const double scale = std::max(t.abs().max().item<double>(), 1e-6);
    EXPECT_LT((t - gloo.at(name)).abs().max().item<double>() / scale, 1e-5) << name;
  }
  // The flat gradients as one tensor (DataParallel::all_reduce_device) sum
  // the same values in the same order: the same weights bit for bit.
  TensorMap tensor = TwoMembers("gloo-tensor");
  ASSERT_EQ(tensor.size(), gloo.size());
  for (auto& [name, t] : gloo) EXPECT_TRUE(torch::equal(t, tensor.at(name))) << name;
}

}  // namespace
}  // namespace burst
