// Scheduler tests for sampling calls and the workers' long poll: waits that
// end on the fake clock alone, a caller that goes away (CancelCall) at
// each stage of its call, and /v1/workers as each organisation sees it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/runtime_test_util.h"

namespace burst {
namespace {

double RealSecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class CallsTest : public RuntimeTest {
 protected:
  // The one slot trains a job of org A; returns the worker.
  std::string Busy() {
    Submit(org_a_);
    std::string w = Register();
    Lease(w);
    return w;
  }
  Json WorkerEntry(const Json& pool, const std::string& id) {
    for (const Json& w : pool["data"])
      if (w["id"] == id) return w;
    return Json();
  }
};

TEST_F(CallsTest, ALongPollEndsWhenTheFakeClockPassesItsDeadline) {
  std::string w = Idle();
  std::atomic<bool> returned{false};
  Result<std::optional<Json>> got = Status(Code::kInternal, "not run");
  const auto t0 = std::chrono::steady_clock::now();
  std::thread poll([&] {
    got = rt_->Lease(w, "burst-small", 30'000);
    returned = true;
  });
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 1; })) << "the long poll never parked";
  clock_.Advance(29'000);
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 1 || returned; }));
  EXPECT_FALSE(returned) << "returned before its deadline";
  clock_.Advance(1'001);
  poll.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got.value().has_value()) << "nothing to do: 204";
  EXPECT_LT(RealSecondsSince(t0), 5.0) << "a 30 s poll ended by fake time, not real time";
}

TEST_F(CallsTest, ACallWaitingForAWorkerGivesUpOnTheFakeClock) {
  Busy();
  auto call = Call(org_b_, "smpl-wait");
  const auto t0 = std::chrono::steady_clock::now();
  std::thread client([&] { rt_->Sample(call, 60'000); });
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 1; }));
  clock_.Advance(60'001);
  client.join();
  ASSERT_TRUE(call->done);
  EXPECT_EQ(call->error.code(), Code::kResourceExhausted);
  EXPECT_EQ(call->error.reason(), "capacity");
  EXPECT_EQ(call->error.param(), "");
  EXPECT_LT(RealSecondsSince(t0), 5.0);
}

TEST_F(CallsTest, AStreamReadWaitsForPiecesOrItsDeadline) {
  std::string w = Idle();
  auto call = rt_->Sample(Call(org_b_, "smpl-s", /*stream=*/true), 10'000, /*until_started=*/true);
  ASSERT_EQ(call->worker, w);
  ASSERT_EQ(Lease(w)["id"], "smpl-s");
  std::vector<Json> pieces;
  bool done = true;
  std::thread reader([&] { pieces = rt_->NextChunks(call, 1000, &done); });
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 1; }));
  bool cancel = true;
  ASSERT_TRUE(rt_->SampleChunks(w, "smpl-s", Json::array({{{"index", 0}, {"delta", "he"}}}), &cancel).ok());
  EXPECT_FALSE(cancel);
  reader.join();
  ASSERT_EQ(pieces.size(), 1u) << "a piece wakes the reader";
  EXPECT_FALSE(done);
  std::thread idle_reader([&] { pieces = rt_->NextChunks(call, 1000, &done); });
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 1; }));
  clock_.Advance(1001);
  idle_reader.join();
  EXPECT_TRUE(pieces.empty()) << "nothing within the wait";
  EXPECT_FALSE(done);
}

// Batched decoding: a call on the same weights for the same organisation
// joins the worker already decoding (handed over by JoinSample), another
// organisation's waits; the worker stays busy until its last call is
// answered; JoinSample never hands over a loop request.
TEST_F(CallsTest, CallsOnTheSameWeightsJoinABusyWorkersBatch) {
  std::string w = Idle();
  auto first = rt_->Sample(Call(org_b_, "smpl-1", true), 10'000, /*until_started=*/true);
  ASSERT_EQ(first->worker, w);
  ASSERT_EQ(Lease(w)["id"], "smpl-1");
  auto joined = rt_->Sample(Call(org_b_, "smpl-2", true), 10'000, /*until_started=*/true);
  EXPECT_EQ(joined->worker, w) << "same weights, same organisation: it joins the batch";
  auto got = rt_->JoinSample(w);
  ASSERT_TRUE(got.ok() && got.value());
  EXPECT_EQ((*got.value())["id"], "smpl-2");
  EXPECT_EQ((*got.value())["kind"], "sample");
  got = rt_->JoinSample(w);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got.value()) << "nothing more to hand over";
  Json mine = WorkerEntry(rt_->WorkersJson(org_b_), w);
  EXPECT_EQ(mine["sampling_calls"], 2);
  EXPECT_EQ(mine["sampling"], "smpl-1");

  auto other = Call(org_a_, "smpl-3", true);
  std::thread client([&] { rt_->Sample(other, 10'000, /*until_started=*/true); });
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 1; }));
  EXPECT_TRUE(other->worker.empty()) << "another organisation's call does not join";

  const Json samples = {{"samples", Json::array()}};
  ASSERT_TRUE(rt_->SampleResult(w, "smpl-1", samples, Json()).ok());
  EXPECT_TRUE(joined->worker == w && !joined->done);
  EXPECT_EQ(WorkerEntry(rt_->WorkersJson(org_b_), w)["state"], "busy") << "its batch still decodes smpl-2";
  EXPECT_TRUE(other->worker.empty());
  ASSERT_TRUE(rt_->SampleResult(w, "smpl-2", samples, Json()).ok());
  client.join();
  EXPECT_EQ(other->worker, w) << "the emptied worker takes the waiting call";
  got = rt_->JoinSample(w);
  ASSERT_TRUE(got.ok() && got.value())
      << "a sampling call for the worker, idle a moment ago: handed over too";
  EXPECT_EQ((*got.value())["id"], "smpl-3");
  ASSERT_TRUE(rt_->SampleResult(w, "smpl-3", samples, Json()).ok());

  auto loop = Call(org_b_, "req-1-0");
  loop->loop.emplace();
  loop->task = {{"op", {{"type", "optim_step"}}}};
  loop = rt_->Sample(loop, 10'000, /*until_started=*/true);
  ASSERT_EQ(loop->worker, w);
  got = rt_->JoinSample(w);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got.value()) << "a loop request waits for the lease";
  EXPECT_EQ(Lease(w)["id"], "req-1-0");
  EXPECT_EQ(rt_->JoinSample("wrk-nosuch").status().code(), Code::kNotFound);
}

// A loop request's restore recipe goes only to a worker whose lease did not
// report holding the run: the holder gets the request alone.
TEST_F(CallsTest, TheRestoreRecipeGoesOnlyToAWorkerNotHoldingTheRun) {
  std::string w = Idle();
  auto request = [&](const std::string& id) {
    auto c = Call(org_b_, id);
    c->loop.emplace();
    c->loop->affinity = "run-1";
    c->task = {{"run", "run-1"}, {"op", {{"type", "optim_step"}}}, {"version", 3}};
    c->loop->restore = {{"snapshot", nullptr}, {"replay", Json::array({{{"type", "forward_backward"}}})}};
    return c;
  };
  auto first = rt_->Sample(request("req-1-0"), 10'000, /*until_started=*/true);
  ASSERT_EQ(first->worker, w);
  Json task = Lease(w);
  EXPECT_EQ(task["id"], "req-1-0");
  EXPECT_EQ(task["restore"]["replay"].size(), 1u) << "a worker without the run gets the recipe";
  ASSERT_TRUE(rt_->SampleResult(w, "req-1-0", {{"result", Json::object()}}, Json()).ok());
  auto second = rt_->Sample(request("req-2-0"), 10'000, /*until_started=*/true);
  ASSERT_EQ(second->worker, w);
  auto got = rt_->Lease(w, "", 0, {}, /*held=*/{"run-1"});
  ASSERT_TRUE(got.ok() && got.value());
  EXPECT_EQ((*got.value())["id"], "req-2-0");
  EXPECT_FALSE(got.value()->contains("restore")) << "the holder needs none: " << got.value()->dump();
}

// A training loop's sample requests on one sampler's weights batch like
// API calls do (joining by sample_join), but never with API calls, nor with
// another run's, nor with other weights.
TEST_F(CallsTest, ALoopsSampleRequestsOnTheSameWeightsJoinOneBatch) {
  std::string w = Idle();
  auto loop_sample = [&](const std::string& id, const std::string& run, const std::string& prefix) {
    auto c = Call(org_b_, id);
    c->loop.emplace();
    c->run = run;
    c->task = {{"op", {{"type", "sample"}, {"checkpoint_prefix", prefix}, {"prompt", {1, 2}}}}};
    return c;
  };
  auto first = rt_->Sample(loop_sample("req-a-0", "run-1", "ck/1/"), 10'000, /*until_started=*/true);
  ASSERT_EQ(first->worker, w);
  ASSERT_EQ(Lease(w)["id"], "req-a-0");
  auto joined = rt_->Sample(loop_sample("req-b-0", "run-1", "ck/1/"), 10'000, /*until_started=*/true);
  EXPECT_EQ(joined->worker, w) << "the same run's sampler: it joins";
  auto got = rt_->JoinSample(w);
  ASSERT_TRUE(got.ok() && got.value());
  EXPECT_EQ((*got.value())["id"], "req-b-0");
  EXPECT_EQ((*got.value())["kind"], "loop");
  EXPECT_EQ((*got.value())["op"]["type"], "sample");
  for (auto other : {loop_sample("req-c-0", "run-1", "ck/2/"), loop_sample("req-d-0", "run-2", "ck/1/"),
                     Call(org_b_, "smpl-x")}) {
    std::thread client([&] { rt_->Sample(other, 10'000, /*until_started=*/true); });
    ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 1; }));
    EXPECT_TRUE(other->worker.empty()) << other->id << " does not join";
    rt_->CancelCall(other);
    client.join();
  }
  const Json answer = {{"result", {{"sequences", Json::array()}}}, {"usage", {{"prefill_tokens", 2}}}};
  ASSERT_TRUE(rt_->SampleResult(w, "req-a-0", answer, Json()).ok());
  ASSERT_TRUE(rt_->SampleResult(w, "req-b-0", answer, Json()).ok());
  EXPECT_TRUE(first->done && first->error.ok() && joined->done && joined->error.ok());
}

// A ticket's label-scoring calls (loop sample requests whose prompts share
// their first 16+ tokens) go to the batch that holds the first, where its
// prefix is prefilled once, before the other idle worker warm with the same
// model; another ticket's first call takes that idle worker.
TEST_F(CallsTest, CallsSharingAPromptPrefixJoinTheBatchThatHoldsIt) {
  opt_.slots = 2;
  Restart();
  Submit(org_a_);
  Submit(org_a_);
  ASSERT_EQ(exec_.started.size(), 2u);
  std::vector<std::string> workers;
  std::vector<Json> tasks;
  for (const auto& s : exec_.started) {  // each takes a job, then both finish: two idle workers
    ASSERT_TRUE(rt_->Register(s.worker_id, 0).ok());
    tasks.push_back(Lease(s.worker_id));
    ASSERT_TRUE(tasks.back().is_object()) << s.worker_id << " got no job";
    workers.push_back(s.worker_id);
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    ASSERT_TRUE(rt_->Finish(workers[i], tasks[i]["job"], 1, "completed", Json(), false, 1, 1).ok());
  }
  for (const std::string& w : workers)
    EXPECT_TRUE(Lease(w, "burst-small").is_null()) << "warm, nothing to do";
  auto scoring = [&](const std::string& id, int first_token, int label) {
    std::vector<int64_t> prompt;
    for (int i = 0; i < 20; ++i) prompt.push_back(first_token + i);
    prompt.push_back(label);
    auto c = Call(org_b_, id);
    c->loop.emplace();
    c->run = "run-1";
    c->base_model = "burst-small";  // the model both workers are warm with
    c->task = {{"op", {{"type", "sample"}, {"checkpoint_prefix", "ck/1/"}, {"prompt", prompt}}}};
    return c;
  };
  auto a = rt_->Sample(scoring("t1-label-a", 100, 7), 10'000, /*until_started=*/true);
  ASSERT_FALSE(a->worker.empty());
  const std::string other = a->worker == workers[0] ? workers[1] : workers[0];
  ASSERT_EQ(Lease(a->worker)["id"], "t1-label-a");
  auto b = rt_->Sample(scoring("t1-label-b", 100, 8), 10'000, /*until_started=*/true);
  EXPECT_EQ(b->worker, a->worker) << "the same ticket's prompt: its batch, not the idle worker";
  auto c = rt_->Sample(scoring("t2-label-a", 500, 7), 10'000, /*until_started=*/true);
  EXPECT_EQ(c->worker, other) << "another ticket: the idle warm worker";
  const Json answer = {{"result", {{"sequences", Json::array()}}}, {"usage", {{"prefill_tokens", 21}}}};
  ASSERT_TRUE(rt_->SampleResult(a->worker, "t1-label-a", answer, Json()).ok());
  ASSERT_TRUE(rt_->SampleResult(b->worker, "t1-label-b", answer, Json()).ok());
  ASSERT_EQ(Lease(other)["id"], "t2-label-a");
  ASSERT_TRUE(rt_->SampleResult(other, "t2-label-a", answer, Json()).ok());
}

TEST_F(CallsTest, CancellingACallThatWaitsForAWorkerDropsItFromTheQueue) {
  std::string w = Busy();
  auto call = Call(org_b_, "smpl-gone");
  std::thread client([&] { rt_->Sample(call, 60'000); });
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 1; }));
  rt_->CancelCall(call);
  client.join();
  ASSERT_TRUE(call->done);
  EXPECT_EQ(call->error.code(), Code::kCancelled);
  EXPECT_TRUE(call->worker.empty());
  // The slot frees: the dropped call is not handed to the worker.
  const std::string job = Must(md_->ListJobs(org_a_, "", 10))[0].id;
  ASSERT_TRUE(rt_->Finish(w, job, 1, "completed", Json(), false, 1, 1).ok());
  EXPECT_TRUE(Lease(w).is_null());
  EXPECT_EQ(rt_->WorkersJson(org_b_)["data"][0]["state"], "idle");
}

TEST_F(CallsTest, CancellingACallItsWorkerHasNotTakenFreesTheWorkerAtOnce) {
  std::string w = Idle();
  auto call = rt_->Sample(Call(org_b_, "smpl-1", true), 60'000, /*until_started=*/true);
  ASSERT_EQ(call->worker, w);
  rt_->CancelCall(call);
  ASSERT_TRUE(call->done);
  EXPECT_EQ(call->error.code(), Code::kCancelled);
  EXPECT_TRUE(Lease(w, "burst-small").is_null()) << "the worker never hears of it";
  auto next = rt_->Sample(Call(org_b_, "smpl-2", true), 60'000, true);
  EXPECT_EQ(next->worker, w) << "the worker is free for the next call";
  EXPECT_EQ(Lease(w)["id"], "smpl-2");
  // Nothing ran for the cancelled call, so nothing is billed to it.
  for (const UsageRecord& u : Must(md_->WorkerUsage(w))) EXPECT_NE(u.job_id, "smpl-1") << u.line;
}

TEST_F(CallsTest, ARunningStreamIsToldToStopAndOnlyWhatItSampledIsBilled) {
  opt_.price_prefill_per_mtok = 1.0;
  opt_.price_sample_per_mtok = 2.0;
  Restart();
  std::string w = Idle();
  auto call = rt_->Sample(Call(org_b_, "smpl-3", true, BillingScope::kServerless), 60'000, true);
  ASSERT_EQ(Lease(w)["id"], "smpl-3");
  bool cancel = true;
  ASSERT_TRUE(rt_->SampleChunks(w, "smpl-3", Json::array({{{"index", 0}, {"delta", "a"}}}), &cancel).ok());
  EXPECT_FALSE(cancel);
  rt_->CancelCall(call);
  EXPECT_FALSE(call->done) << "it runs until its worker stops";
  ASSERT_TRUE(rt_->SampleChunks(w, "smpl-3", Json::array(), &cancel).ok()) << "a keep-alive";
  EXPECT_TRUE(cancel) << "the worker learns it from its next post";
  Json partial = {{"prompt_tokens", 3},
                  {"samples", {{{"text", "a"}, {"token_ids", {7}}, {"finish_reason", "cancelled"}}}}};
  ASSERT_TRUE(rt_->SampleResult(w, "smpl-3", partial, {{"code", "cancelled"}, {"message", "stopped"}}).ok());
  ASSERT_TRUE(call->done);
  EXPECT_EQ(call->error.code(), Code::kCancelled);
  int64_t tokens = 0;
  double cost = 0;
  for (const UsageSum& l : Must(md_->SumUsage(org_b_, 0, 0))) {
    tokens += l.tokens;
    cost += l.cost;
  }
  EXPECT_EQ(tokens, 4) << "3 prompt tokens and the 1 token sampled";
  EXPECT_DOUBLE_EQ(cost, (3 * 1.0 + 1 * 2.0) / 1e6);
  // The worker is free again.
  std::string job = Submit(org_a_);
  EXPECT_EQ(Lease(w)["job"], job);
}

TEST_F(CallsTest, AWorkerThatIgnoresACancelledCallIsStopped) {
  std::string w = Idle();
  auto call = rt_->Sample(Call(org_b_, "smpl-4", true), 60'000, true);
  ASSERT_EQ(Lease(w)["id"], "smpl-4");
  rt_->CancelCall(call);
  clock_.Advance(19'000);
  rt_->Tick();
  EXPECT_TRUE(exec_.stopped.empty());
  clock_.Advance(1'001);
  rt_->Tick();
  ASSERT_EQ(exec_.stopped.size(), 1u);
  EXPECT_EQ(exec_.stopped[0], w);
  exec_.Exit(w, "signal 15");
  rt_->Tick();
  EXPECT_TRUE(call->done);
}

TEST_F(CallsTest, EachOrganisationSeesItsOwnWorkAndOnlyThat) {
  opt_.slots = 2;
  Restart();
  const std::string job = Submit(org_a_, "burst-small", {{"base_model", "/srv/burst/models/burst-small"}});
  const std::string wa = Register();
  ASSERT_EQ(Lease(wa)["job"], job);
  auto call = Call(org_b_, "smpl-b");
  std::thread client([&] { rt_->Sample(call, 60'000); });
  ASSERT_TRUE(WaitFor([&] { return rt_->LiveWorkerCount() == 2; }));
  const std::string wb = Register();
  ASSERT_EQ(Lease(wb)["id"], "smpl-b");

  const Json a = rt_->WorkersJson(org_a_);
  const Json own_a = WorkerEntry(a, wa), other_a = WorkerEntry(a, wb);
  EXPECT_EQ(own_a["job"], job);
  EXPECT_EQ(own_a["model"], "burst-small") << "the name A used, not the server's folder";
  EXPECT_EQ(own_a["state"], "busy");
  EXPECT_TRUE(own_a["pid"].is_number());
  EXPECT_EQ(other_a["state"], "busy");
  for (const char* k : {"job", "sampling", "deployment", "pid", "model"})
    EXPECT_TRUE(other_a[k].is_null()) << k;
  for (const std::string& secret : {std::string("smpl-b"), org_b_, std::string("/srv/")})
    EXPECT_EQ(a.dump().find(secret), std::string::npos) << secret << " in " << a.dump();

  const Json b = rt_->WorkersJson(org_b_);
  EXPECT_EQ(WorkerEntry(b, wb)["sampling"], "smpl-b");
  EXPECT_EQ(WorkerEntry(b, wb)["model"], "base");
  for (const std::string& secret : {job, org_a_, std::string("/srv/"), std::string("burst-small")})
    EXPECT_EQ(b.dump().find(secret), std::string::npos) << secret << " in " << b.dump();

  ASSERT_TRUE(rt_->SampleResult(wb, "smpl-b", Answer("x"), Json()).ok());
  client.join();
  // Idle in the pool: nobody's work, no model path.
  const Json idle = WorkerEntry(rt_->WorkersJson(org_a_), wb);
  EXPECT_EQ(idle["state"], "idle");
  EXPECT_TRUE(idle["model"].is_null());
}

}  // namespace
}  // namespace burst
