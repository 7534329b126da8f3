// Loops against the runtime with the test acting as the worker (no
// processes): what a request carries to the worker, and what the control
// plane does with the worker's answers.
#include "runtime/loops.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "runtime/runtime_test_util.h"

namespace burst {

// Reads what Loops keeps of its download links (a friend of Loops).
struct LoopsArchiveProbe {
  static std::vector<std::string> Keys(Loops& loops) {
    std::lock_guard<std::mutex> lock(loops.mu_);
    std::vector<std::string> keys;
    for (const auto& [key, link] : loops.archives_) keys.push_back(key);
    return keys;
  }
};

namespace {

class LoopsTest : public RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    loops_ = std::make_unique<Loops>(*rt_, 60'000);
  }
  void TearDown() override {
    loops_.reset();
    RuntimeTest::TearDown();
  }

  void Limit(LoopLimits limits) { loops_ = std::make_unique<Loops>(*rt_, 60'000, limits); }

  // Ends loops_ while its threads wait for workers on the fake clock.
  void StopLoops() {
    std::atomic<bool> stopped{false};
    std::thread stopper([&] {
      loops_.reset();
      stopped = true;
    });
    while (!stopped) {
      clock_.Advance(61'000);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    stopper.join();
  }

  static int Threads() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
    return -1;
  }

  // A run's info for `org` (B by default) in a session of its own.
  LoopRunInfo Info(const std::string& org = "") {
    LoopRunInfo info;
    info.org_id = org.empty() ? org_b_ : org;
    info.session_id = loops_->CreateSession(info.org_id, Json::array(), Json::object()).value();
    info.base_model = "/srv/burst/models/base";
    info.base_model_name = "base";
    info.lora = {{"rank", 4}, {"seed", 1}};
    return info;
  }

  Result<std::shared_ptr<LoopFuture>> CreateRun(int64_t model_seq_id, const std::string& org = "") {
    return loops_->CreateRun(Info(org), model_seq_id);
  }

  std::string NewRun() {
    auto made = CreateRun(0);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return made.ok() ? made.value()->run : "";
  }

  // The next task the worker gets, reporting `held` as the runs it holds.
  Json Next(const std::string& w, const std::vector<std::string>& held) {
    Json task;
    EXPECT_TRUE(WaitFor([&] {
      auto got = rt_->Lease(w, "", 0, {}, held);
      if (!got.ok() || !got.value()) return false;
      task = *got.value();
      return true;
    }));
    return task;
  }

  std::shared_ptr<LoopFuture> Done(const std::string& id) {
    auto f = loops_->Wait(org_b_, id, 10'000);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.value();
  }

  std::unique_ptr<Loops> loops_;
};

// A worker that reports holding the run but not at the version the request
// needs (it answers param "restore") gets the request again, this time with
// the restore recipe, under an attempt id of its own; the future succeeds
// once and the request counts once.
TEST_F(LoopsTest, ARequestRefusedForWantOfItsRestoreRecipeIsResentWithIt) {
  const std::string w = Idle();
  const std::string run = NewRun();
  auto fb = loops_->Submit(org_b_, run, 0, "forward_backward", {{"type", "forward_backward"}});
  ASSERT_TRUE(fb.ok()) << fb.status().ToString();
  Json task = Next(w, {});
  EXPECT_EQ(task["id"], fb.value()->id + "-0");
  ASSERT_TRUE(task.contains("restore")) << "a worker without the run gets the recipe";
  EXPECT_EQ(task["restore"]["replay"].size(), 0u);
  ASSERT_TRUE(rt_->SampleResult(w, task["id"], {{"result", Json::object()}}, Json()).ok());
  EXPECT_TRUE(Done(fb.value()->id)->error.ok());

  auto step = loops_->Submit(org_b_, run, 0, "optim_step", {{"type", "optim_step"}});
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  task = Next(w, {run});
  EXPECT_EQ(task["id"], step.value()->id + "-0");
  EXPECT_EQ(task["version"], 1);
  EXPECT_FALSE(task.contains("restore")) << "the holder needs none: " << task.dump();
  const Status stale(Code::kFailedPrecondition, "holds the run at version 0, not 1", "restore");
  ASSERT_TRUE(rt_->SampleResult(w, task["id"], Json(), StatusJson(stale)).ok());

  task = Next(w, {run});
  EXPECT_EQ(task["id"], step.value()->id + "-1") << "the resend is an attempt of its own";
  ASSERT_TRUE(task.contains("restore")) << "resent with the recipe though the worker says it holds the run";
  ASSERT_EQ(task["restore"]["replay"].size(), 1u);
  EXPECT_EQ(task["restore"]["replay"][0]["type"], "forward_backward");
  ASSERT_TRUE(rt_->SampleResult(w, task["id"], {{"result", {{"step", 1}}}}, Json()).ok());
  auto done = Done(step.value()->id);
  EXPECT_TRUE(done->error.ok()) << done->error.ToString();
  EXPECT_EQ(done->result["step"], 1);
  auto info = loops_->Run(org_b_, run);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info.value().requests, 2) << "each request counted once";
  EXPECT_EQ(info.value().version, 2);
}

// A control plane started again on the journal of one that died goes on
// with its loops: finished results can still be fetched, the run is
// rebuilt from its restore point and the requests after it, the request
// that was on a worker runs again and the one waiting its turn after it; a
// retried POST still finds its future, and the client numbers on.
TEST_F(LoopsTest, AControlPlaneStartedOnTheJournalGoesOnWithItsLoops) {
  auto store = NewMemStore();
  LoopJournal journal(*store);
  loops_ = std::make_unique<Loops>(*rt_, 60'000, LoopLimits{}, &journal);
  const std::string w = Idle();
  const std::string run = NewRun();
  std::vector<std::string> ids;
  auto answer = [&](const std::string& type, const Json& result) {
    auto f = loops_->Submit(org_b_, run, 0, type, {{"n", ids.size()}});
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    ids.push_back(f.value()->id);
    Json task = Next(w, {run});
    EXPECT_TRUE(rt_->SampleResult(w, task["id"], result, Json()).ok());
    EXPECT_TRUE(Done(ids.back())->error.ok());
  };
  answer("forward_backward", {{"result", {{"loss", 1}}}});
  const Json snapshot = {{"prefix", "orgs/b/loops/" + run + "/snapshots/v2/"}, {"version", 2}};
  answer("optim_step", {{"result", {{"step", 1}}}, {"snapshot", snapshot}});
  answer("forward_backward", {{"result", {{"loss", 3}}}});
  auto running = loops_->Submit(org_b_, run, 4, "optim_step", {{"n", 3}});
  auto waiting = loops_->Submit(org_b_, run, 5, "forward", {{"n", 4}});
  ASSERT_TRUE(running.ok() && waiting.ok());
  const Json on_worker = Next(w, {run});
  EXPECT_EQ(on_worker["op"]["n"], 3) << "on a worker when the control plane dies";
  // It stops with the request on the worker, whose answer comes too late
  // (as from a worker cut off): nothing about it is journaled.
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    rt_->SampleResult(w, on_worker["id"], Json(), StatusJson(Status(Code::kInternal, "cut off")))
        .IgnoreError("the call may be gone already");
  });
  StopLoops();
  late.join();
  Restart();
  const std::string w2 = Idle();

  loops_ = std::make_unique<Loops>(*rt_, 60'000, LoopLimits{}, &journal);
  auto recovered = loops_->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
  EXPECT_EQ(recovered.value(), 1);
  EXPECT_EQ(Done(ids[2])->result["loss"], 3) << "a finished result is still fetched";
  auto retried = loops_->Submit(org_b_, run, 4, "optim_step", {{"n", 3}});
  ASSERT_TRUE(retried.ok());
  EXPECT_EQ(retried.value()->id, running.value()->id) << "a retried POST finds the future it made";
  Json task = Next(w2, {});
  EXPECT_EQ(task["id"], running.value()->id + "-0");
  EXPECT_EQ(task["version"], 3);
  ASSERT_TRUE(task.contains("restore")) << task.dump();
  EXPECT_EQ(task["restore"]["snapshot"], snapshot);
  ASSERT_EQ(task["restore"]["replay"].size(), 1u) << "the forward_backward after the restore point";
  EXPECT_EQ(task["restore"]["replay"][0]["n"], 2);
  ASSERT_TRUE(rt_->SampleResult(w2, task["id"], {{"result", {{"step", 2}}}}, Json()).ok());
  EXPECT_EQ(Done(running.value()->id)->result["step"], 2);
  task = Next(w2, {run});
  EXPECT_EQ(task["op"]["n"], 4) << "then the request that waited its turn";
  EXPECT_EQ(task["version"], 4);
  ASSERT_TRUE(rt_->SampleResult(w2, task["id"], {{"result", {{"loss", 5}}}}, Json()).ok());
  EXPECT_TRUE(Done(waiting.value()->id)->error.ok());
  auto next = loops_->Submit(org_b_, run, 6, "optim_step", {{"n", 5}});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  task = Next(w2, {run});
  EXPECT_EQ(task["version"], 4);
  ASSERT_TRUE(rt_->SampleResult(w2, task["id"], {{"result", {{"step", 3}}}}, Json()).ok());
  EXPECT_TRUE(Done(next.value()->id)->error.ok());
  StopLoops();
}

// What the control plane forgets (a session a day without a heartbeat, and
// its samplers) leaves the journal too, so a restart does not bring it back.
TEST_F(LoopsTest, WhatIsForgottenLeavesTheJournal) {
  auto store = NewMemStore();
  LoopJournal journal(*store);
  loops_ = std::make_unique<Loops>(*rt_, 60'000, LoopLimits{}, &journal);
  const std::string old = loops_->CreateSession(org_b_, Json::array(), Json::object()).value();
  ASSERT_TRUE(loops_->CreateSampler(org_b_, old, 0, {{"base_model", "base"}}).ok());
  clock_.Advance(25LL * 3600 * 1000);
  const std::string run = NewRun();  // its requests sweep what is past its time
  auto kept = journal.Load();
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept.value().sessions.count(old), 0u);
  EXPECT_TRUE(kept.value().samplers.empty());
  EXPECT_EQ(kept.value().sessions.size(), 1u) << "the new run's session stays";
  EXPECT_EQ(kept.value().runs.count(run), 1u);
  StopLoops();
}

// A deactivated run takes no more requests (400 naming model_id, which the
// SDK does not retry), fails those waiting for their turn, stops counting
// against the organisation's live runs, and stays so after a restart.
TEST_F(LoopsTest, ADeactivatedRunTakesNoMoreRequestsAndStaysSo) {
  auto store = NewMemStore();
  LoopJournal journal(*store);
  LoopLimits limits;
  limits.max_runs_per_org = 1;
  loops_ = std::make_unique<Loops>(*rt_, 60'000, limits, &journal);
  const std::string run = NewRun();
  auto waiting = loops_->Submit(org_b_, run, 2, "optim_step",
                                {{"n", 2}, {"pad", std::string(10'000, 'x')}});  // seq 1 never comes
  EXPECT_GT(loops_->BytesHeld(org_b_), 10'000);
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  EXPECT_EQ(CreateRun(1).status().reason(), "org_cap");
  ASSERT_TRUE(loops_->Deactivate(org_b_, run).ok());
  EXPECT_TRUE(loops_->Deactivate(org_b_, run).ok()) << "idempotent";
  EXPECT_EQ(loops_->Deactivate(org_a_, run).code(), Code::kNotFound) << "another organisation's";
  auto failed = Done(waiting.value()->id);
  EXPECT_EQ(failed->error.code(), Code::kFailedPrecondition) << failed->error.ToString();
  auto refused = loops_->Submit(org_b_, run, 1, "forward_backward", {{"n", 1}});
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(refused.status().param(), "model_id");
  EXPECT_LT(loops_->BytesHeld(org_b_), 100) << "its data let go (the failure is kept until fetched)";
  EXPECT_FALSE(loops_->Run(org_b_, run).value().active);
  EXPECT_TRUE(CreateRun(1).ok()) << "it no longer counts as live";
  StopLoops();
  loops_ = std::make_unique<Loops>(*rt_, 60'000, limits, &journal);
  ASSERT_TRUE(loops_->Recover().ok());
  EXPECT_FALSE(loops_->Run(org_b_, run).value().active) << "still inactive after a restart";
  EXPECT_EQ(loops_->Submit(org_b_, run, 1, "forward_backward", {{"n", 1}}).status().param(), "model_id");
  StopLoops();
}

// The worker that holds a run its owner deactivates is told at its next
// lease to let it go; a live run it holds is not named, and nothing is
// named twice.
TEST_F(LoopsTest, TheWorkerHoldingADeactivatedRunIsToldToLetItGo) {
  const std::string w = Idle();
  const std::string run = NewRun();
  const std::string live = NewRun();
  ASSERT_TRUE(loops_->Deactivate(org_b_, run).ok());
  auto got = rt_->Lease(w, "", 0, {}, {run, live});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got.value().has_value());
  EXPECT_EQ((*got.value())["action"], "drop");
  EXPECT_EQ((*got.value())["loops"], Json::array({run}));
  auto next = rt_->Lease(w, "", 0, {}, {live});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_FALSE(next.value().has_value()) << "no work, and nothing more to let go";
}

// A store whose writes fail while `fail` is set (the rest goes to memory).
class FailingStore : public ObjectStore {
 public:
  bool fail = false;
  Status Put(const std::string& key, std::string_view data) override {
    return fail ? Status(Code::kUnavailable, "disk full") : mem_->Put(key, data);
  }
  Status PutFile(const std::string& key, const std::filesystem::path& src) override {
    return fail ? Status(Code::kUnavailable, "disk full") : mem_->PutFile(key, src);
  }
  Result<std::string> Get(const std::string& key) const override { return mem_->Get(key); }
  Status GetToFile(const std::string& key, const std::filesystem::path& dst) const override {
    return mem_->GetToFile(key, dst);
  }
  Result<ObjectInfo> Stat(const std::string& key) const override { return mem_->Stat(key); }
  Result<std::vector<ObjectInfo>> List(const std::string& prefix) const override {
    return mem_->List(prefix);
  }
  Status Delete(const std::string& key) override { return mem_->Delete(key); }
  Status DeletePrefix(const std::string& prefix) override { return mem_->DeletePrefix(prefix); }
  std::string Url() const override { return "failing://"; }

 private:
  std::unique_ptr<ObjectStore> mem_ = NewMemStore();
};

// Nothing a failed request asked for stays: a session, run, request or
// sampler the journal cannot keep is refused (kUnavailable: retry) and is
// not there afterwards; once the journal works again, the same calls work.
TEST_F(LoopsTest, WhatTheJournalCannotKeepIsRefusedAndNotMade) {
  FailingStore store;
  LoopJournal journal(store);
  loops_ = std::make_unique<Loops>(*rt_, 60'000, LoopLimits{}, &journal);
  const std::string run = NewRun();
  const std::string session = loops_->Run(org_b_, run).value().session_id;
  store.fail = true;
  auto refused = loops_->CreateSession(org_b_, Json::array(), Json::object());
  EXPECT_EQ(refused.status().code(), Code::kUnavailable) << refused.status().ToString();
  EXPECT_EQ(loops_->Sessions(org_b_).size(), 1u);
  auto request = loops_->Submit(org_b_, run, 1, "forward_backward", {{"n", 1}});
  EXPECT_EQ(request.status().code(), Code::kUnavailable);
  EXPECT_EQ(loops_->BytesHeld(org_b_), 0) << "nothing held for it";
  auto sampler = loops_->CreateSampler(org_b_, session, 0, {{"base_model", "base"}});
  EXPECT_EQ(sampler.status().code(), Code::kUnavailable);
  EXPECT_FALSE(loops_->Sampler(org_b_, session + "-sample-0").ok());
  LoopRunInfo info = loops_->Run(org_b_, run).value();
  auto second = loops_->CreateRun(info, 1);
  EXPECT_EQ(second.status().code(), Code::kUnavailable);
  EXPECT_EQ(loops_->Runs(org_b_).size(), 1u);
  store.fail = false;
  auto again = loops_->Submit(org_b_, run, 1, "forward_backward", {{"n", 1}});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(loops_->CreateSampler(org_b_, session, 0, {{"base_model", "base"}}).ok());
  StopLoops();
}

// Only once: a worker that refuses the recipe too fails the request with
// its error instead of being asked forever.
TEST_F(LoopsTest, ARequestIsResentWithItsRecipeOnlyOnce) {
  const std::string w = Idle();
  const std::string run = NewRun();
  auto fb = loops_->Submit(org_b_, run, 0, "forward_backward", {{"type", "forward_backward"}});
  ASSERT_TRUE(fb.ok());
  const Status stale(Code::kFailedPrecondition, "cannot restore", "restore");
  for (const char* attempt : {"-0", "-1"}) {
    Json task = Next(w, {run});
    EXPECT_EQ(task["id"], fb.value()->id + attempt);
    ASSERT_TRUE(rt_->SampleResult(w, task["id"], Json(), StatusJson(stale)).ok());
  }
  auto done = Done(fb.value()->id);
  EXPECT_EQ(done->error.code(), Code::kFailedPrecondition);
  EXPECT_EQ(done->error.param(), "restore");
  auto info = loops_->Run(org_b_, run);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info.value().version, 0) << "a failed request changes nothing";
}

// One organisation's live runs are capped (429 org_cap, another
// organisation unaffected); a run idle long enough is parked and stops
// counting, and a request revives it if there is room.
TEST_F(LoopsTest, LiveRunsAreCappedPerOrganisationAndIdleOnesAreParked) {
  LoopLimits limits;
  limits.max_runs_per_org = 2;
  limits.run_idle_ms = 10'000;
  Limit(limits);
  const std::string r1 = CreateRun(0).value()->run, r2 = CreateRun(1).value()->run;
  auto third = CreateRun(2);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().reason(), "org_cap");
  EXPECT_EQ(third.status().param(), "max_loop_runs");
  EXPECT_TRUE(CreateRun(0, org_a_).ok()) << "another organisation has its own count";
  clock_.Advance(10'001);
  auto after_idle = CreateRun(2);
  ASSERT_TRUE(after_idle.ok()) << "idle runs are parked and no longer count: "
                               << after_idle.status().ToString();
  EXPECT_TRUE(loops_->Submit(org_b_, r1, 0, "optim_step", Json::object()).ok())
      << "a request revives a parked run";
  auto revive = loops_->Submit(org_b_, r2, 0, "optim_step", Json::object());
  EXPECT_EQ(revive.status().reason(), "org_cap") << "... while there is room only";
  EXPECT_EQ(loops_->Runs(org_b_).size(), 3u) << "parked runs are still listed";
  StopLoops();
}

// Requests that wait for their turn (sent ahead of the run's next seq_id)
// hold their data: past the run's share they are refused naming "data",
// past the organisation's with 429 rate_limit; nothing refused is held.
TEST_F(LoopsTest, RequestsWaitingForTheirTurnAreBoundedInBytes) {
  LoopLimits limits;
  limits.max_bytes_per_run = 100'000;
  limits.max_bytes_per_org = 150'000;
  Limit(limits);
  const std::string r1 = CreateRun(0).value()->run, r2 = CreateRun(1).value()->run;
  const Json data = {{"data", std::string(40'000, 'x')}};
  ASSERT_TRUE(loops_->Submit(org_b_, r1, 2, "forward_backward", data).ok());
  ASSERT_TRUE(loops_->Submit(org_b_, r1, 3, "forward_backward", data).ok());
  auto over_run = loops_->Submit(org_b_, r1, 4, "forward_backward", data);
  ASSERT_FALSE(over_run.ok());
  EXPECT_EQ(over_run.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(over_run.status().param(), "data");
  ASSERT_TRUE(loops_->Submit(org_b_, r2, 2, "forward_backward", data).ok());
  const int64_t held = loops_->BytesHeld(org_b_);
  EXPECT_GT(held, 120'000);
  EXPECT_LT(held, 121'000) << "held as CBOR, not as a JSON tree";
  auto over_org = loops_->Submit(org_b_, r2, 3, "forward_backward", data);
  ASSERT_FALSE(over_org.ok());
  EXPECT_EQ(over_org.status().reason(), "rate_limit");
  EXPECT_EQ(loops_->BytesHeld(org_b_), held) << "a refused request holds nothing";
  EXPECT_EQ(loops_->BytesHeld(org_a_), 0);
  // Requests that wait too long for an earlier seq_id fail and let go.
  auto waiting =
      loops_->Submit(org_b_, r1, 2, "forward_backward", data);  // the same request again: its future
  ASSERT_TRUE(waiting.ok());
  clock_.Advance(limits.max_wait_turn_ms + 1);
  auto later = loops_->Submit(org_b_, r2, 3, "forward_backward", data);
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  ASSERT_TRUE(loops_->IsDone(waiting.value()));
  EXPECT_EQ(waiting.value()->error.param(), "seq_id") << waiting.value()->error.ToString();
  EXPECT_LT(loops_->BytesHeld(org_b_), 41'000) << "only the new request is held";
  StopLoops();
}

// A run made by loading a checkpoint (the SDK's create-via-load): the load
// is its request 0, a retry while it waits gets the same future, a load
// refused for want of room leaves no run behind, and a run that has gone on
// is not made again.
TEST_F(LoopsTest, ARunMadeByALoadTakesItAsRequestZero) {
  LoopLimits limits;
  limits.max_bytes_per_org = 20'000;
  Limit(limits);
  const LoopRunInfo info = Info();
  const Json load = {{"prefix", "p/"}, {"optimizer", false}, {"path", "tinker://x-train-0/weights/a"}};
  // Too big for the organisation's share: refused, and no run is left.
  auto refused = loops_->CreateRunByLoad(info, 5, Json{{"prefix", std::string(30'000, 'x')}});
  ASSERT_FALSE(refused.ok());
  EXPECT_FALSE(loops_->Run(org_b_, info.session_id + "-train-5").ok()) << "a failed request creates nothing";
  auto first = loops_->CreateRunByLoad(info, 5, load);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first.value()->type, "load_weights");
  EXPECT_EQ(first.value()->run, info.session_id + "-train-5");
  auto retried = loops_->CreateRunByLoad(info, 5, load);
  ASSERT_TRUE(retried.ok());
  EXPECT_EQ(retried.value(), first.value()) << "the SDK's retry: the same request";
  // The client's next request is seq 1: it waits behind the load, not in its place.
  auto next = loops_->Submit(org_b_, first.value()->run, 1, "forward", {{"data", "y"}});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_NE(next.value(), first.value());
  StopLoops();
}

// Sampling requests wait for a worker on a bounded pool of threads (a
// share per organisation), not on a thread each.
TEST_F(LoopsTest, SamplesWaitOnABoundedPoolOfThreads) {
  LoopLimits limits;
  limits.threads_per_org = 4;
  Limit(limits);
  Submit(org_a_);  // the one slot trains: samples wait
  Lease(Register());
  const int before = Threads();
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(loops_
                    ->Sample(org_b_, "/srv/burst/models/base", "", BillingScope::kDedicated, "",
                             {{"prompt", {1, 2, 3}}})
                    .ok());
  }
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 4; }));
  EXPECT_LE(Threads() - before, 4) << "200 samples waiting";
  StopLoops();
}

// A download link's token is a credential: the links are kept by its
// digest, so no lookup compares the token itself (a timing side channel).
TEST_F(LoopsTest, ArchiveLinksAreKeptByTheirTokensDigest) {
  const int64_t expires = clock_.NowMs() + 60'000;
  const std::string token = loops_->IssueArchive("orgs/o/loops/r/sampler_weights/s1/", "s1", expires);
  ASSERT_EQ(token.rfind("arch-", 0), 0u) << token;
  const std::vector<std::string> keys = LoopsArchiveProbe::Keys(*loops_);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].find(token.substr(5)), std::string::npos) << "the token itself is kept: " << keys[0];

  auto got = loops_->Archive(token);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value().first, "orgs/o/loops/r/sampler_weights/s1/");
  EXPECT_EQ(got.value().second, "s1");
  std::string wrong = token;
  wrong.back() = wrong.back() == 'a' ? 'b' : 'a';
  EXPECT_EQ(loops_->Archive(wrong).status().code(), Code::kNotFound);
  EXPECT_EQ(loops_->Archive("").status().code(), Code::kNotFound);
  clock_.Advance(60'000);
  EXPECT_EQ(loops_->Archive(token).status().code(), Code::kNotFound) << "expired";
}

}  // namespace
}  // namespace burst
