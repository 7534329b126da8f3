// The scheduler on a pool with GPUs (fake ones: the executor is fake too):
// a job that asks for a GPU type gets a worker holding GPUs of that type,
// never a CPU slot; a GPU type all held does not hold back other work; the
// worker's time is billed per GPU at its type's price.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/runtime_test_util.h"

namespace burst {
namespace {

class GpusTest : public RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    opt_.slots = 1;
    opt_.gpus = {{0, "h100", "NVIDIA H100 80GB HBM3", "GPU-0"},
                 {1, "h100", "NVIDIA H100 80GB HBM3", "GPU-1"},
                 {2, "l40s", "NVIDIA L40S", "GPU-2"}};
    opt_.price_per_gpu_second = {{"h100", 2.0}, {"l40s", 1.0}};
    Restart();
  }

  const WorkerLaunch& Launched(const std::string& worker) { return exec_.launches.at(worker); }

  // The job's events' messages, oldest first.
  std::vector<std::string> Events(const std::string& job) {
    std::vector<std::string> out;
    for (const EventRecord& e : Must(md_->ListEvents(job, "", 100, true))) out.push_back(e.message);
    return out;
  }
};

TEST_F(GpusTest, AGpuJobGetsAWorkerOnGpusOfItsTypeAndACpuJobACpuSlot) {
  const std::string gpu_job = Submit(org_a_, "burst-small", {{"gpu", "h100"}});
  const std::string cpu_job = Submit(org_b_);
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 2u);
  const WorkerLaunch g = exec_.started[0].device == "h100" ? exec_.started[0] : exec_.started[1];
  const WorkerLaunch c = exec_.started[0].device == "h100" ? exec_.started[1] : exec_.started[0];
  EXPECT_EQ(g.slot, -1) << "a GPU worker holds no CPU slot";
  ASSERT_EQ(g.gpus.size(), 1u);
  EXPECT_EQ(g.gpus[0].uuid, "GPU-0") << "the lowest free GPU of the type";
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.slot, 0);
  EXPECT_TRUE(c.gpus.empty());
  // Each worker gets its own kind of work, whichever registers first.
  ASSERT_TRUE(rt_->Register(c.worker_id, 0).ok());
  EXPECT_EQ(Lease(c.worker_id)["job"], cpu_job);
  auto wrong = rt_->Register(g.worker_id, 0, 0, {}, "cpu");
  EXPECT_EQ(wrong.status().param(), "device") << "a worker on another device than it was started for";
  ASSERT_TRUE(rt_->Register(g.worker_id, 0, 0, {}, "h100").ok());
  EXPECT_EQ(Lease(g.worker_id)["job"], gpu_job);
  const Json workers = rt_->WorkersJson(org_a_);
  EXPECT_EQ(workers["gpus"].size(), 3u);
  bool seen = false;
  for (const Json& w : workers["data"]) {
    if (w["id"] != g.worker_id) continue;
    seen = true;
    EXPECT_EQ(w["device"], "h100");
    EXPECT_EQ(w["gpus"], Json::array({0}));
  }
  EXPECT_TRUE(seen) << workers.dump();
  const Runtime::Gauges gauges = rt_->ReadGauges();
  EXPECT_EQ(gauges.gpus_by_type_state.at({"h100", "held"}), 1);
  EXPECT_EQ(gauges.gpus_by_type_state.at({"h100", "free"}), 1);
  EXPECT_EQ(gauges.gpus_by_type_state.at({"l40s", "free"}), 1);
  EXPECT_EQ(gauges.workers_by_state_device.at({"busy", "h100"}), 1);
  EXPECT_EQ(gauges.workers_by_state_device.at({"busy", "cpu"}), 1);
}

TEST_F(GpusTest, AJobWaitsForItsTypeSaysWhyAndHoldsBackNothingElse) {
  const std::string first = Submit(org_a_, "burst-small", {{"gpu", "h100:2"}});
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 1u);
  const std::string w = exec_.started[0].worker_id;
  EXPECT_EQ(Launched(w).gpus.size(), 2u);
  ASSERT_TRUE(rt_->Register(w, 0).ok());
  ASSERT_EQ(Lease(w)["job"], first);
  // Both H100s are held: the next H100 job waits, and says so once.
  const std::string second = Submit(org_a_, "burst-small", {{"gpu", "h100:2"}});
  const std::string cpu_job = Submit(org_a_);
  rt_->Tick();
  rt_->Tick();
  EXPECT_EQ(Job(second).status, JobStatus::kQueued);
  const auto events = Events(second);
  EXPECT_EQ(std::count(events.begin(), events.end(), "Waiting for a GPU: h100:2 (2 of 2 h100 held)"), 1)
      << ::testing::PrintToString(events);
  ASSERT_EQ(exec_.started.size(), 2u) << "the CPU job behind it started a CPU worker";
  EXPECT_EQ(exec_.started[1].device, "cpu");
  const std::string cw = Register();
  EXPECT_EQ(Lease(cw)["job"], cpu_job);
  // The first ends: its idle worker, on the same two GPUs, takes the second.
  ASSERT_TRUE(rt_->Finish(w, first, 1, "completed", Json(), false, 7, 100).ok());
  EXPECT_EQ(Lease(w)["job"], second);
  EXPECT_EQ(exec_.started.size(), 2u) << "no new worker: the warm one fits";
}

TEST_F(GpusTest, AJobWhoseGpuWorkersFailToStartSaysSo) {
  exec_.fail_starts = true;
  const std::string job = Submit(org_a_, "burst-small", {{"gpu", "h100"}});
  rt_->Tick();
  const auto events = Events(job);
  EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](const std::string& e) {
    return e.find("h100 is free, but the last worker starts failed") != std::string::npos;
  })) << ::testing::PrintToString(events);
  EXPECT_EQ(Job(job).status, JobStatus::kQueued);
}

TEST_F(GpusTest, PreferencesFallToTheNextTypeWithRoomAndCpuWorkLeavesGpuWorkersAlone) {
  // One h100 job holds GPU 0; a job preferring h100:2, then l40s, goes to the L40S.
  Submit(org_a_, "burst-small", {{"gpu", "h100"}});
  rt_->Tick();
  ASSERT_TRUE(rt_->Register(exec_.started[0].worker_id, 0).ok());
  const std::string pref = Submit(org_b_, "burst-small", {{"gpu", Json::array({"h100:2", "l40s"})}});
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 2u);
  EXPECT_EQ(exec_.started[1].device, "l40s");
  const std::string l40s = Register();
  EXPECT_EQ(Lease(l40s)["job"], pref);
  ASSERT_TRUE(rt_->Finish(l40s, pref, 1, "completed", Json(), false, 7, 100).ok());
  // A sampling call does not take the idle L40S worker: it starts a CPU one.
  std::thread client([&] { rt_->Sample(Call(org_b_, "smpl-1"), 10'000); });
  ASSERT_TRUE(WaitFor([&] { return exec_.StartedCount() == 3u; }));
  EXPECT_EQ(exec_.Started()[2].device, "cpu");
  clock_.Advance(10'001);
  client.join();
}

TEST_F(GpusTest, AGpuWorkersTimeIsBilledPerGpuAtItsTypesPrice) {
  const std::string job = Submit(org_a_, "burst-small", {{"gpu", "h100:2"}});
  rt_->Tick();
  const std::string w = Register();
  ASSERT_EQ(Lease(w)["job"], job);
  clock_.Advance(10'000);
  ASSERT_TRUE(rt_->Finish(w, job, 1, "completed", Json(), false, 7, 100).ok());
  exec_.Exit(w);
  rt_->Tick();
  const auto rows = Must(md_->WorkerUsage(w));
  ASSERT_FALSE(rows.empty());
  double seconds = 0, cost = 0;
  for (const UsageRecord& u : rows) {
    EXPECT_EQ(u.device, "h100");
    EXPECT_EQ(u.units, 2);
    seconds += static_cast<double>(u.end_ms - u.start_ms) / 1000.0;
    cost += u.cost;
  }
  EXPECT_GE(seconds, 10.0);
  EXPECT_DOUBLE_EQ(cost, seconds * 2.0 * 2) << "two GPUs at 2.0 a second each";
  const auto sums = Must(md_->SumUsage(org_a_, 0, 0));
  double gpu_seconds = 0;
  for (const UsageSum& s : sums) gpu_seconds += s.device == "h100" ? s.device_seconds : 0;
  EXPECT_DOUBLE_EQ(gpu_seconds, seconds * 2);
}

TEST_F(GpusTest, AGangOnGpusStartsTogetherEachWorkerOnItsOwnGpus) {
  const std::string job =
      Submit(org_a_, "burst-small", {{"gpu", "h100"}, {"workers", 2}, {"communication", "store"}});
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 2u);
  ASSERT_EQ(exec_.groups.size(), 1u) << "started together";
  EXPECT_NE(exec_.started[0].gpus[0].index, exec_.started[1].gpus[0].index);
  for (const WorkerLaunch& l : exec_.started) ASSERT_TRUE(rt_->Register(l.worker_id, 0).ok());
  EXPECT_EQ(Lease(exec_.started[0].worker_id)["job"], job);
  EXPECT_EQ(Lease(exec_.started[1].worker_id)["job"], job);
  // Three workers of one H100 each can never fit: refused, naming gpu.
  JobRecord j;
  j.id = NewId("ftjob");
  j.org_id = org_a_;
  j.request_sha256 = j.id;
  j.spec = {{"model", "burst-small"}, {"gpu", "h100"}, {"workers", 3}};
  bool created = false;
  auto r = rt_->Submit(j, &created);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().param(), "gpu");
  EXPECT_FALSE(created);
}

TEST_F(GpusTest, ALocalWorkerSeesOnlyItsGpusAndACpuWorkerNone) {
  WorkerLaunch gpu;
  gpu.device = "h100";
  gpu.gpus = {opt_.gpus[1], opt_.gpus[0]};
  const auto env = WorkerDeviceEnv(gpu, true);
  const std::map<std::string, std::string> m(env.begin(), env.end());
  EXPECT_EQ(m.at("BURST_WORKER_DEVICE"), "h100");
  EXPECT_EQ(m.at("CUDA_VISIBLE_DEVICES"), "GPU-1,GPU-0");
  EXPECT_EQ(m.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  const auto on_slurm = WorkerDeviceEnv(gpu, false);
  EXPECT_EQ(on_slurm.size(), 1u) << "Slurm's GRES sets CUDA_VISIBLE_DEVICES";
  const auto cpu_env = WorkerDeviceEnv(WorkerLaunch(), true);
  const std::map<std::string, std::string> c(cpu_env.begin(), cpu_env.end());
  EXPECT_EQ(c.at("CUDA_VISIBLE_DEVICES"), "");
}

// Sampling and loop calls on a model whose catalog entry asks for a GPU
// (RuntimeOptions::call_devices) start a worker on that GPU and run there,
// never on a CPU worker; calls on a CPU model leave GPU workers alone; a
// model the pool cannot serve answers its call with the error.
class GpuCallsTest : public GpusTest {
 protected:
  void SetUp() override {
    GpusTest::SetUp();
    opt_.call_devices = [](const std::string& base_model,
                           const std::string& /*model_name*/) -> Result<std::vector<DeviceClaim>> {
      if (base_model == "/models/gpu") return std::vector<DeviceClaim>{{"l40s", 1}, {"h100", 1}};
      if (base_model == "/models/broken") return Status(Code::kInvalidArgument, "no such GPU", "model");
      return std::vector<DeviceClaim>{};
    };
    Restart();
  }
  std::shared_ptr<WorkerCall> CallOn(const std::string& model, const std::string& id) {
    auto call = Call(org_b_, id);
    call->base_model = model;
    return call;
  }
};

TEST_F(GpuCallsTest, ACallOnAGpuModelRunsOnItsGpuAndACpuCallOnACpuWorker) {
  auto on_gpu = CallOn("/models/gpu", "smpl-g");
  std::thread gpu_client([&] { rt_->Sample(on_gpu, 10'000, /*until_started=*/true); });
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 1; }));
  ASSERT_EQ(exec_.started.size(), 1u);
  const WorkerLaunch g = exec_.started[0];
  EXPECT_EQ(g.device, "l40s") << "the first claim of the model's with room";
  EXPECT_EQ(g.slot, -1);
  EXPECT_EQ(on_gpu->devices.size(), 2u);
  // A CPU call starts a CPU worker of its own, and does not take the GPU
  // worker when that registers first.
  std::thread cpu_client([&] { rt_->Sample(CallOn("/models/cpu", "smpl-c"), 10'000, true); });
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 2; }));
  ASSERT_EQ(exec_.started.size(), 2u);
  const WorkerLaunch c = exec_.started[1];
  EXPECT_EQ(c.device, "cpu");
  ASSERT_TRUE(rt_->Register(g.worker_id, 0, 0, {}, "l40s").ok());
  gpu_client.join();
  EXPECT_EQ(on_gpu->worker, g.worker_id);
  EXPECT_EQ(Lease(g.worker_id)["id"], "smpl-g");
  ASSERT_TRUE(rt_->Register(c.worker_id, 0).ok());
  EXPECT_EQ(Lease(c.worker_id)["id"], "smpl-c");
  cpu_client.join();
  // Answered, the GPU worker is idle: the next call on the GPU model takes
  // it warm, a second one joins its batch; neither starts a CPU worker.
  ASSERT_TRUE(rt_->SampleResult(g.worker_id, "smpl-g", Answer("a"), Json()).ok());
  auto again = rt_->Sample(CallOn("/models/gpu", "smpl-g2"), 10'000, true);
  EXPECT_EQ(again->worker, g.worker_id);
  auto joined = rt_->Sample(CallOn("/models/gpu", "smpl-g3"), 10'000, true);
  EXPECT_EQ(joined->worker, g.worker_id);
  EXPECT_EQ(exec_.started.size(), 2u);
}

TEST_F(GpuCallsTest, ACallWhoseModelThePoolCannotServeIsAnsweredWithTheError) {
  auto call = rt_->Sample(CallOn("/models/broken", "smpl-x"), 10'000);
  ASSERT_TRUE(call->done);
  EXPECT_EQ(call->error.code(), Code::kInvalidArgument);
  EXPECT_EQ(call->error.param(), "model");
  EXPECT_TRUE(exec_.started.empty()) << "no worker for a call that cannot run";
}

}  // namespace
}  // namespace burst
