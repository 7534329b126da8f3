// `burst serve` on a machine that lists GPUs, end to end: the real binary
// finds them through nvidia-smi, prices them, accepts a job that asks for
// one and refuses one it cannot give, starts a real `burst worker` pinned to
// its GPU, and that worker (a CPU-only libtorch here) refuses to run on a
// GPU it cannot see, so the job waits: it never trains on a CPU instead.
//
// This machine has no GPU: a stand-in `nvidia-smi` early on PATH lists two
// H100s (the real tool's --query-gpu output format), nothing behind them.
#include <gtest/gtest.h>

#include <cstdlib>

#include "e2e_http.h"

namespace burst::e2e {
namespace {

class GpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = std::make_unique<TempDir>("burst-e2e-gpus-bin");
    const fs::path smi = bin_->path() / "nvidia-smi";
    std::ofstream(smi) << "#!/bin/sh\n"
                          "case \"$*\" in *--query-gpu=index,uuid,name*) ;; *) exit 9;; esac\n"
                          "echo '0, GPU-5a1e0000-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3'\n"
                          "echo '1, GPU-5a1e0000-0000-0000-0000-000000000001, NVIDIA H100 80GB HBM3'\n";
    fs::permissions(smi, fs::perms::owner_all);
    const char* path = std::getenv("PATH");
    old_path_ = path ? path : "";
    ::setenv("PATH", (bin_->path().string() + ":" + old_path_).c_str(), 1);
  }
  void TearDown() override { ::setenv("PATH", old_path_.c_str(), 1); }

  std::unique_ptr<TempDir> bin_;
  std::string old_path_;
};

TEST_F(GpusTest, AGpuJobGoesToAWorkerOnItsGpuAndNeverToACpu) {
  ServeProcess s("burst-e2e-gpus", {"--slots", "1", "--price-per-hour", "cpu=0.36,h100=2.50"});
  ASSERT_TRUE(s.error().empty()) << s.error();
  EXPECT_TRUE(Contains(s.Output(), "GPUs 2 x h100 (h100 2.50/GPU-hour)")) << s.Output();
  const Resp workers = s.Send("GET", "/v1/workers");
  ASSERT_EQ(workers.status, 200) << workers.Describe();
  ASSERT_EQ(workers.body["gpus"].size(), 2u) << workers.raw;
  EXPECT_EQ(workers.body["gpus"][1]["type"], "h100");
  EXPECT_EQ(workers.body["gpus"][1]["name"], "NVIDIA H100 80GB HBM3");
  const Json prices = s.Send("GET", "/v1/prices").body["prices"]["dedicated"];
  EXPECT_DOUBLE_EQ(prices["h100"]["per_gpu_hour"].get<double>(), 2.5) << prices.dump();
  EXPECT_DOUBLE_EQ(prices["cpu"]["per_slot_hour"].get<double>(), 0.36) << prices.dump();

  const std::string file = s.Upload(SupportTrain());
  ASSERT_FALSE(file.empty());
  // A type the pool has not: 400 naming gpu and the pool; nothing created.
  const Resp l40s = s.Send("POST", "/v1/fine_tuning/jobs",
                           {{"model", "burst-small"}, {"training_file", file}, {"gpu", "l40s"}});
  EXPECT_EQ(l40s.status, 400) << l40s.Describe();
  EXPECT_EQ(l40s.body["error"]["param"], "gpu");
  EXPECT_TRUE(Contains(l40s.body["error"]["message"].get<std::string>(), "2 x h100")) << l40s.raw;
  EXPECT_TRUE(s.Send("GET", "/v1/fine_tuning/jobs").body["data"].empty());

  const Resp job = s.Send("POST", "/v1/fine_tuning/jobs",
                          {{"model", "burst-small"}, {"training_file", file}, {"gpu", "H100"}});
  ASSERT_EQ(job.status, 200) << job.Describe();
  EXPECT_EQ(job.body["gpu"], Json::array({"h100"}));
  const std::string id = job.body["id"];
  // Its worker is started on GPU 0 (the job's events say so) and leaves at
  // once: libtorch here sees no CUDA device.
  const fs::path logs = s.dir().path() / "data" / "workers" / "logs";
  std::string refused;
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(logs, ec)) {
          const std::string text = Slurp(e.path());
          if (Contains(text, "libtorch sees no CUDA device")) refused = text;
        }
        return !refused.empty();
      },
      60))
      << s.Output();
  EXPECT_TRUE(Contains(refused, "started for h100 GPUs")) << refused;
  EXPECT_TRUE(Contains(refused, "CUDA_VISIBLE_DEVICES=GPU-5a1e0000-0000-0000-0000-000000000000")) << refused;
  Resp events;
  EXPECT_TRUE(WaitUntil(
      [&] {
        events = s.Send("GET", "/v1/fine_tuning/jobs/" + id + "/events");
        return Contains(events.raw, "the last worker starts failed");
      },
      30))
      << "the job says why it waits: " << events.raw;
  EXPECT_TRUE(Contains(events.raw, "(h100 GPU 0)")) << events.raw;
  // It waits; no worker ever runs it on a CPU slot.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const Resp now = s.Send("GET", "/v1/fine_tuning/jobs/" + id);
  EXPECT_NE(now.body["status"], "running") << now.raw;
  EXPECT_NE(now.body["status"], "succeeded") << now.raw;
  for (const Json& w : s.Send("GET", "/v1/workers").body["data"]) EXPECT_NE(w["device"], "cpu") << w.dump();
  EXPECT_EQ(s.Send("POST", "/v1/fine_tuning/jobs/" + id + "/cancel").status, 200);

  // The same through the CLI: --gpu as the request's field.
  ProcResult cli =
      s.Burst({"jobs", "create", "--model", "burst-small", "--training-file", file, "--gpu", "l40s,any:4"});
  EXPECT_FALSE(cli.ok());
  EXPECT_TRUE(Contains(cli.err + cli.out, "gpu")) << cli.Describe();
  EXPECT_TRUE(Contains(cli.err + cli.out, "2 x h100")) << cli.Describe();
  // The cost planner prices a GPU slot at its type's price.
  ProcResult cross =
      s.Burst({"cost", "crossover", "--device", "h100", "--tokens-per-second", "5000", "--json"});
  ASSERT_TRUE(cross.ok()) << cross.Describe();
  EXPECT_DOUBLE_EQ(Json::parse(cross.out)["on_demand_per_slot_hour"].get<double>(), 2.5) << cross.out;
  ProcResult wrong = s.Burst({"cost", "crossover", "--device", "l40s"});
  EXPECT_FALSE(wrong.ok());
  EXPECT_TRUE(Contains(wrong.err + wrong.out, "prices cpu, h100")) << wrong.Describe();
}

// A model registered with --gpu: its sampling calls start a worker on its
// GPU (here one that cannot run, so the call waits and gives up with 429
// capacity), never a CPU worker; a model whose GPU the pool has not answers
// 400 naming model; a job on it must ask for a GPU.
TEST_F(GpusTest, AModelsCatalogGpuPutsItsCallsOnThatGpu) {
  ServeProcess s("burst-e2e-gpus-calls", {"--slots", "1", "--sample-wait", "4"});
  ASSERT_TRUE(s.error().empty()) << s.error();
  const std::string data = (s.dir().path() / "data").string();
  const std::string small = (SourceDir() / "models" / "burst-small").string();
  ProcResult add = RunBurst({"models", "add", "on-h100", small, "--gpu", "h100", "--data", data});
  ASSERT_TRUE(add.ok()) << add.Describe();
  add = RunBurst({"models", "add", "on-l40s", small, "--gpu", "l40s,a100", "--data", data});
  ASSERT_TRUE(add.ok()) << add.Describe();
  ProcResult bad = RunBurst({"models", "add", "bad", small, "--gpu", "h100:99", "--data", data});
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.err + bad.out, "gpu")) << bad.Describe();
  const Resp listed = s.Send("GET", "/v1/models/on-h100");
  ASSERT_EQ(listed.status, 200) << listed.Describe();
  EXPECT_EQ(listed.body["accelerator"], "cuda");
  EXPECT_EQ(listed.body["gpu"], Json::array({"h100"}));

  auto prompt = [](const std::string& model) {
    return Json{{"model", model}, {"prompt", "hello"}, {"max_tokens", 2}};
  };
  const Resp elsewhere = s.Send("POST", "/v1/completions", prompt("on-l40s"));
  EXPECT_EQ(elsewhere.status, 400) << elsewhere.Describe();
  EXPECT_EQ(elsewhere.body["error"]["param"], "model");
  EXPECT_TRUE(Contains(elsewhere.raw, "2 x h100")) << elsewhere.raw;

  const Resp waited = s.Send("POST", "/v1/completions", prompt("on-h100"));
  EXPECT_EQ(waited.status, 429) << waited.Describe();
  EXPECT_EQ(waited.body["error"]["code"], "capacity") << waited.raw;
  bool gpu_worker = false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(s.dir().path() / "data" / "workers" / "logs", ec))
    gpu_worker |= Contains(Slurp(e.path()), "started for h100 GPUs");
  EXPECT_TRUE(gpu_worker) << "the call's worker was started on its GPU";
  for (const Json& w : s.Send("GET", "/v1/workers").body["data"]) EXPECT_NE(w["device"], "cpu") << w.dump();
  // The same base model as a CPU model still samples on a CPU worker.
  const Resp cpu = s.Send("POST", "/v1/completions", prompt("burst-small"));
  EXPECT_EQ(cpu.status, 200) << cpu.Describe();

  const std::string file = s.Upload(SupportTrain());
  const Resp job = s.Send("POST", "/v1/fine_tuning/jobs", {{"model", "on-h100"}, {"training_file", file}});
  EXPECT_EQ(job.status, 400) << job.Describe();
  EXPECT_EQ(job.body["error"]["param"], "gpu");
  EXPECT_TRUE(Contains(job.raw, "runs on a GPU")) << job.raw;
}

TEST_F(GpusTest, TheGpusFlagChoosesAmongThemAndAnUnknownOneStopsTheStart) {
  {
    ServeProcess none("burst-e2e-gpus-none", {"--gpus", "none"});
    ASSERT_TRUE(none.error().empty()) << none.error();
    EXPECT_TRUE(none.Send("GET", "/v1/workers").body["gpus"].empty());
  }
  {
    ServeProcess one("burst-e2e-gpus-one", {"--gpus", "1"});
    ASSERT_TRUE(one.error().empty()) << one.error();
    const Json gpus = one.Send("GET", "/v1/workers").body["gpus"];
    ASSERT_EQ(gpus.size(), 1u);
    EXPECT_EQ(gpus[0]["index"], 1);
  }
  ServeProcess bad("burst-e2e-gpus-bad", {"--gpus", "2"});
  EXPECT_FALSE(bad.error().empty());
  EXPECT_TRUE(Contains(bad.error(), "--gpus")) << bad.error();
  EXPECT_TRUE(Contains(bad.error(), "2 x h100")) << bad.error();
}

}  // namespace
}  // namespace burst::e2e
