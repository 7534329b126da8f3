// The scheduler tests' fixture: an in-memory (or file) database, a fake
// executor and a fake clock; helpers to submit, register and lease.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/fs.h"
#include "core/ids.h"
#include "db/sqlite.h"
#include "runtime/runtime.h"

namespace burst {

template <typename T>
T Must(Result<T> r) {
  if (!r.ok()) throw Error(r.status());
  return std::move(r).value();
}

// The database in `path` refuses to write workers ("disk full") until
// Lift() or the end of this object's life: a failing usage ledger.
class WorkerWritesRefused {
 public:
  explicit WorkerWritesRefused(const std::string& path) : db_(Must(Db::Open(path))) {
    Check(
        db_->Exec("CREATE TRIGGER no_workers BEFORE INSERT ON workers "
                  "BEGIN SELECT RAISE(ABORT, 'disk full'); END;"));
  }
  ~WorkerWritesRefused() { Lift(); }
  void Lift() {
    if (lifted_) return;
    lifted_ = true;
    Check(db_->Exec("DROP TRIGGER no_workers"));
  }

 private:
  static void Check(const Status& s) {
    if (!s.ok()) throw Error(s);
  }
  std::unique_ptr<Db> db_;
  bool lifted_ = false;
};

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    md_ = Must(Metadata::Open(":memory:"));
    org_a_ = Must(md_->CreateOrg("a")).id;
    org_b_ = Must(md_->CreateOrg("b")).id;
    opt_.slots = 1;
    opt_.lease_ttl_ms = 10'000;
    opt_.scaledown_window_ms = 60'000;
    opt_.price_per_slot_second = 0.5;
    Restart();
  }

  void TearDown() override {
    rt_.reset();
    md_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void Restart() {
    rt_.reset();
    rt_ = std::make_unique<Runtime>(*md_, exec_, clock_, opt_);
  }

  // A database in a file (a second connection can then break its writes);
  // returns its path.
  std::string UseFileDb() {
    rt_.reset();
    dir_ = MakeTempDir("burst-runtime-test");
    std::string path = (dir_ / "meta.db").string();
    md_ = Must(Metadata::Open(path));
    org_a_ = Must(md_->CreateOrg("a")).id;
    org_b_ = Must(md_->CreateOrg("b")).id;
    Restart();
    return path;
  }

  // Waits (real time) for another thread to reach a state the test can
  // see; false after 10 s, so a broken runtime fails the test instead of
  // hanging it. It looks every 100 us: `done` usually takes the runtime's
  // lock, which a tighter loop would keep from the thread it waits for
  // (and a yield hands the core to any other process on the machine).
  static bool WaitFor(const std::function<bool()>& done) {
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > limit) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
  }

  std::string Submit(const std::string& org, const std::string& model = "burst-small",
                     Json extra = Json::object()) {
    JobRecord j;
    j.id = NewId("ftjob");
    j.org_id = org;
    j.request_sha256 = j.id;
    j.spec = {{"model", model}, {"training_file", "file-x"}, {"max_retries", 2}};
    j.total_steps = 7;
    for (auto it = extra.begin(); it != extra.end(); ++it) j.spec[it.key()] = *it;
    bool created = false;
    auto rec = rt_->Submit(j, &created);
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
    EXPECT_TRUE(created);
    return rec.value().id;
  }

  // One worker (registered), idle after a job of org A.
  std::string Idle() {
    std::string job = Submit(org_a_);
    std::string w = Register();
    EXPECT_EQ(Lease(w)["job"], job);
    EXPECT_TRUE(rt_->Finish(w, job, 1, "completed", Json(), false, 1, 1).ok());
    return w;
  }

  // Registers the newest started worker; returns its id.
  std::string Register() {
    std::string id = exec_.started.back().worker_id;
    auto r = rt_->Register(id, 0);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return id;
  }

  Json Lease(const std::string& worker, const std::string& model = "",
             const std::vector<std::string>& checkpoints = {}) {
    auto r = rt_->Lease(worker, model, 0, checkpoints);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.value() ? *r.value() : Json();
  }

  JobRecord Job(const std::string& id) { return Must(md_->GetJobById(id)); }

  std::unique_ptr<Metadata> md_;
  FakeClock clock_;
  FakeExecutor exec_{clock_};
  RuntimeOptions opt_;
  std::unique_ptr<Runtime> rt_;
  std::string org_a_, org_b_;
  std::filesystem::path dir_;
};

// A worker's sampling answer (docs/api.md, "Workers").
inline Json Answer(const std::string& text) {
  return {{"prompt_tokens", 3},
          {"samples", {{{"text", text}, {"token_ids", {5, 6}}, {"finish_reason", "stop"}}}}};
}

// A plain sampling call (any worker) on a base model, named as its caller did.
inline std::shared_ptr<WorkerCall> Call(const std::string& org, const std::string& id, bool stream = false,
                                        BillingScope scope = BillingScope::kDedicated) {
  auto call = std::make_shared<WorkerCall>();
  call->id = id;
  call->org_id = org;
  call->base_model = "/srv/burst/models/base";
  call->task = {{"request", {{"model", "base"}, {"prompt", "hi"}}}};
  call->stream = stream;
  call->scope = scope;
  return call;
}

inline DeploymentRecord Dep(const std::string& org, const std::string& name, Json request) {
  DeploymentRecord d;
  d.id = NewId("dep");
  d.org_id = org;
  d.name = name;
  d.request = std::move(request);
  d.request_sha256 = d.request.dump();
  d.target = {{"base_model", "/models/base"},
              {"checkpoint_prefix", "orgs/x/jobs/y/checkpoints/step-1/sampler/"}};
  return d;
}

inline std::shared_ptr<WorkerCall> DepCall(const std::string& org, const std::string& dep,
                                           const std::string& id) {
  auto call = std::make_shared<WorkerCall>();
  call->id = id;
  call->org_id = org;
  call->base_model = "/models/base";
  call->deployment = dep;
  call->task = {{"request", {{"prompt", "hi"}}}};
  return call;
}

}  // namespace burst
