// What one organisation (or one client without a key) may hold of the API
// server, in process: connections that never send a request, request
// threads, long polls, request bodies in memory and on disk, stored bytes.
// Each test has another organisation (or address) check it still gets
// answered.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "api/server_test_util.h"

namespace burst {
namespace {

class SharesApiTest : public ApiServerTest {
 protected:
  void TearDown() override {
    // Calls on workers end as their workers exit; calls waiting for a
    // worker on the fake clock give up: their threads end with the server.
    if (rt_) {
      for (const WorkerLaunch& w : exec_.started) exec_.Exit(w.worker_id, "exit 1");
      rt_->Tick();
      rt_->Shutdown(false, 0);
    }
    for (auto& t : clients_) t.join();
    ApiServerTest::TearDown();
  }

  // A POST on a thread of its own (it may wait long); its status lands in *status.
  void Background(const std::string& key, const std::string& path, const std::string& body,
                  std::atomic<int>* status = nullptr) {
    clients_.emplace_back([this, key, path, body, status] {
      httplib::Client c("127.0.0.1", port_);
      c.set_read_timeout(60, 0);
      c.set_default_headers({{"Authorization", "Bearer " + key}});
      auto r = c.Post(path, body, "application/json");
      if (status) *status = r ? r->status : -1;
    });
  }

  // A Tinker sampling request that no worker answers (none registers): its
  // future stays pending.
  std::string PendingFuture(const std::string& key) {
    auto c = Client(key);
    const Json sample = {{"base_model", "burst-small"},
                         {"prompt", {{"chunks", {{{"type", "encoded_text"}, {"tokens", {1, 2, 3}}}}}}},
                         {"sampling_params", {{"max_tokens", 2}}},
                         {"num_samples", 1}};
    auto r = c.Post("/api/v1/asample", sample.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return Json::parse(r->body)["request_id"];
  }

  std::vector<std::thread> clients_;
};

// Connections that open and say nothing are closed after the head timeout
// (not the 60 s idle one), and however many an address opens it keeps only
// a few idle, so silent clients cannot take every connection.
TEST_F(SharesApiTest, SilentConnectionsCannotShutOthersOut) {
  opt_.http.max_connections = 40;
  opt_.http.max_idle_per_address = 4;
  opt_.http.idle_grace_ms = 100;
  Start();
  std::vector<std::unique_ptr<RawConn>> silent;
  for (int a = 2; a < 12; ++a) {
    for (int i = 0; i < 8; ++i)
      silent.push_back(std::make_unique<RawConn>(port_, "127.0.0." + std::to_string(a)));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto c = Client("");
  auto r = c.Get("/v1/health");
  ASSERT_TRUE(r) << "no answer";
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_LE(server_->stats().open, 41) << "each address keeps at most 4 idle";
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));  // past the 1 s head timeout
  int closed = 0;
  for (auto& s : silent) {
    bool gone = false;
    s->Read(100, &gone);
    closed += gone;
  }
  EXPECT_EQ(closed, static_cast<int>(silent.size())) << "a connection that never sent a head is closed";
}

// A retrieve_future long poll waits with no thread (parked), so a crowd of
// them leaves the pool alone, and each is answered when its wait ends.
TEST_F(SharesApiTest, LongPollsWaitWithoutHoldingThreads) {
  Start();
  const std::string future = PendingFuture(key_a_);
  const int64_t threads_before = server_->stats().threads;
  constexpr int kPolls = 60;
  for (int i = 0; i < kPolls; ++i) {  // one after another: each waits before the next comes
    Background(key_a_, "/api/v1/retrieve_future", Json{{"request_id", future}}.dump());
    const auto t0 = std::chrono::steady_clock::now();
    while (server_->stats().parked <= i && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  EXPECT_EQ(server_->stats().parked, kPolls);
  EXPECT_LE(server_->stats().threads - threads_before, 4) << kPolls << " long polls waiting";
  auto b = Client(key_b_);
  auto r = b.Get("/v1/files");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// One organisation's slow requests hold at most its share of the request
// threads: another organisation's requests, and the workers' heartbeats on
// their own pool, are answered at once.
TEST_F(SharesApiTest, OneOrganisationsSlowRequestsLeaveThreadsForOthers) {
  opt_.http.max_threads = 4;
  opt_.http.max_threads_per_tenant = 2;
  Start();
  auto [worker, token] = StartWorker();  // holds the one slot: completions wait
  const std::string call = R"({"model": "burst-small", "prompt": "hi", "max_tokens": 1})";
  for (int i = 0; i < 6; ++i) Background(key_a_, "/v1/completions", call);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto b = Client(key_b_);
  b.set_read_timeout(3, 0);
  auto r = b.Get("/v1/files");
  ASSERT_TRUE(r) << "org B waited behind org A's calls";
  EXPECT_EQ(r->status, 200);
  auto w = Client(token);
  w.set_read_timeout(3, 0);
  auto hb = w.Post("/internal/v1/register", R"({"pid": 1})", "application/json");
  ASSERT_TRUE(hb) << "a worker's request waited behind API traffic";
  EXPECT_LT(hb->status, 500) << hb->body;
}

// Request bodies in memory count against their organisation's share (429
// past it); uploads are spooled to disk instead and do not.
TEST_F(SharesApiTest, BodiesInMemoryAreBoundedPerOrganisationAndUploadsGoToDisk) {
  opt_.http.max_body_memory_per_tenant = 1 << 20;
  opt_.http.max_spool_per_tenant = 3 << 20;
  opt_.http.body_grace_ms = 10'000;
  Start();
  auto head = [](const std::string& key, const std::string& path, int64_t length, const std::string& type) {
    return "POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
           "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(length) + "\r\n\r\n";
  };
  RawConn first(port_);
  ASSERT_TRUE(first.Send(head(key_a_, "/v1/fine_tuning/jobs", 700'000, "application/json") + "{"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  RawConn second(port_);
  ASSERT_TRUE(second.Send(head(key_a_, "/v1/fine_tuning/jobs", 700'000, "application/json") + "{"));
  const std::string refused = second.Read(3000);
  EXPECT_EQ(RawConn::StatusOf(refused), 429) << refused;
  EXPECT_NE(refused.find("in flight"), std::string::npos) << refused;
  EXPECT_NE(refused.find("\"code\":\"rate_limit\""), std::string::npos) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos) << refused;
  RawConn other(port_);
  ASSERT_TRUE(other.Send(head(key_b_, "/v1/fine_tuning/jobs", 700'000, "application/json") + "{"));
  EXPECT_EQ(other.Read(500), "") << "org B has its own share: its body is being read";

  // Uploads: 2 MiB each, past the memory share, within the disk share once.
  const std::string boundary = "b0und";
  RawConn up1(port_);
  ASSERT_TRUE(
      up1.Send(head(key_a_, "/v1/files", 2 << 20, "multipart/form-data; boundary=" + boundary) + "--"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  RawConn up2(port_);
  ASSERT_TRUE(
      up2.Send(head(key_a_, "/v1/files", 2 << 20, "multipart/form-data; boundary=" + boundary) + "--"));
  const std::string spool_refused = up2.Read(3000);
  EXPECT_EQ(RawConn::StatusOf(spool_refused), 429) << spool_refused;
  EXPECT_NE(spool_refused.find("uploads"), std::string::npos) << spool_refused;
}

// A whole upload larger than the memory share is spooled, checked and
// stored; past the organisation's storage quota an upload is refused and
// creates nothing.
TEST_F(SharesApiTest, UploadsAreSpooledAndStoredBytesHaveAQuota) {
  opt_.http.max_body_memory_per_tenant = 64 << 10;
  opt_.max_storage_per_org = 300 << 10;
  Start();
  std::string jsonl;
  while (jsonl.size() < (200 << 10))
    jsonl += R"({"prompt": "Where is my parcel?", "completion": "shipping"})"
             "\n";
  auto a = Client(key_a_);
  httplib::MultipartFormDataItems items = {{"file", jsonl, "train.jsonl", "application/jsonl"},
                                           {"purpose", "fine-tune", "", ""}};
  auto r = a.Post("/v1/files", items);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json::parse(r->body)["bytes"], static_cast<int64_t>(jsonl.size()));
  r = a.Post("/v1/files", items);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  const Json err = Json::parse(r->body)["error"];
  EXPECT_EQ(err["type"], "insufficient_quota") << r->body;
  EXPECT_EQ(err["param"], "file");
  auto list = a.Get("/v1/files");
  EXPECT_EQ(Json::parse(list->body)["data"].size(), 1u) << "the refused upload created nothing";
  auto b = Client(key_b_);
  r = b.Post("/v1/files", items);
  EXPECT_EQ(r->status, 200) << "another organisation has its own quota: " << r->body;
}

// `--key-max-rps`: one key past its rate (after a burst of twice it) gets
// 429 rate_limit with Retry-After; another key, of the same organisation
// or not, is still answered; the key passes again as time goes on.
TEST_F(SharesApiTest, OneKeyPastItsRateIsRefusedAndOtherKeysAreNot) {
  opt_.key_max_rps = 2;
  const std::string key_a2 = Must(md_->CreateApiKey(org_a_, "second")).secret;
  Start();
  auto c = Client(key_a_);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(c.Get("/v1/models")->status, 200) << i;
  auto refused = c.Get("/v1/models");
  ASSERT_EQ(refused->status, 429);
  const Json e = Json::parse(refused->body)["error"];
  EXPECT_EQ(e["code"], "rate_limit") << refused->body;
  EXPECT_EQ(e["details"]["limit"], "rate_limit") << refused->body;
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  EXPECT_EQ(Client(key_a2).Get("/v1/models")->status, 200) << "another key of the organisation";
  EXPECT_EQ(Client(key_b_).Get("/v1/models")->status, 200) << "another organisation";
  clock_.Advance(1000);
  EXPECT_EQ(c.Get("/v1/models")->status, 200) << "two more a second";
  EXPECT_EQ(c.Get("/v1/models")->status, 200);
  EXPECT_EQ(c.Get("/v1/models")->status, 429);
}

}  // namespace
}  // namespace burst
