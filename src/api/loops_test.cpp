// Loops against the runtime with the test acting as the worker (no
// processes): what a request carries to the worker, and what the control
// plane does with the worker's answers.
#include "api/loops.h"

#include <gtest/gtest.h>

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

  std::string NewRun() {
    LoopRunInfo info;
    info.org_id = org_b_;
    info.session_id = loops_->CreateSession(org_b_, Json::array(), Json::object());
    info.base_model = "/srv/burst/models/base";
    info.base_model_name = "base";
    info.lora = {{"rank", 4}, {"seed", 1}};
    auto made = loops_->CreateRun(info, 0);
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
