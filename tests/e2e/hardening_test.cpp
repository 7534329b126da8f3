// `burst serve` against clients that misbehave, as a real process with real
// workers: deep JSON and huge bodies leave it up, its data folder is its
// user's only, and a streamed call whose client leaves is cancelled on its
// worker.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "e2e_http.h"

namespace burst::e2e {
namespace {

int Mode(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 0777);
}

TEST(Hardening, DeepJsonAndHugeBodiesLeaveTheServerUp) {
  ServeProcess s("burst-e2e-hardening", {"--slots", "1", "--threads-per-slot", "1"});
  ASSERT_TRUE(s.error().empty()) << s.error();
  const std::string deep = std::string(60000, '[') + std::string(60000, ']');
  for (const char* path : {"/v1/completions", "/v1/fine_tuning/jobs", "/v1/sweeps", "/v1/deployments"}) {
    httplib::Client c("127.0.0.1", s.port());
    auto r = c.Post(path, {{"Authorization", "Bearer " + s.key()}}, R"({"user": )" + deep + "}",
                    "application/json");
    ASSERT_TRUE(r) << path << ": the server went away\n" << s.Output();
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find("limit of 64 levels"), std::string::npos) << r->body;
  }
  // 400 MB declared without a key: answered from the headers.
  Raw big(s.port());
  ASSERT_TRUE(big.ok());
  big.Send("POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Length: 400000000\r\n\r\n");
  big.Send(std::string(1 << 20, 'x'));
  const std::string answer = big.ReadUntil("\r\n\r\n", 5000);
  EXPECT_EQ(answer.rfind("HTTP/1.1 401", 0), 0u) << answer.substr(0, 300);
  EXPECT_EQ(s.Send("GET", "/v1/health").status, 200) << s.Output();
}

TEST(Hardening, TheDataFolderIsItsUsersOnly) {
  ServeProcess s("burst-e2e-hardening", {"--slots", "1", "--threads-per-slot", "1"});
  ASSERT_TRUE(s.error().empty()) << s.error();
  ASSERT_FALSE(s.Upload(SupportValid()).empty());
  const fs::path data = s.dir().path() / "data";
  EXPECT_EQ(Mode(data), 0700);
  EXPECT_EQ(Mode(data / "meta.db"), 0600);
  EXPECT_EQ(Mode(data / "admin.key"), 0600);
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(data / "store")) {
    if (e.is_directory()) {
      EXPECT_EQ(Mode(e.path()), 0700) << e.path();
    } else {
      EXPECT_EQ(Mode(e.path()), 0600) << e.path();
      ++files;
    }
  }
  EXPECT_GE(files, 1);
}

// The sampled tokens billed so far on the usage line "sampling".
int64_t SampledTokens(const ServeProcess& s) {
  int64_t tokens = 0;
  const Resp usage = s.Send("GET", "/v1/usage");
  for (const Json& l : usage.body["data"]) {
    if (l["line"] == "sampling") tokens += l.value("tokens", int64_t{0});
  }
  return tokens;
}

TEST(Hardening, AStreamWhoseClientLeavesIsCancelledOnItsWorker) {
  ServeProcess s("burst-e2e-hardening",
                 {"--slots", "1", "--threads-per-slot", "1", "--scaledown-window", "60"});
  ASSERT_TRUE(s.error().empty()) << s.error();
  // The same call run to its end (and the worker warmed by it, so the
  // timing below is the cancel's alone): how long it would go on.
  const Json call = {{"model", "burst-small"},
                     {"prompt", "A dog is"},
                     {"max_tokens", 1000},
                     {"temperature", 1.0},
                     {"seed", 2},
                     {"n", 16}};
  Resp full = s.Send("POST", "/v1/completions", call);
  ASSERT_EQ(full.status, 200) << full.Describe();
  const int64_t full_tokens = full.body["usage"]["completion_tokens"];
  ASSERT_GE(full_tokens, 2000) << "the reference call ended early; pick another seed";
  const int64_t before = SampledTokens(s);

  Json streamed = call;
  streamed["stream"] = true;
  const std::string body = streamed.dump();
  Raw client(s.port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + s.key() +
                          "\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body));
  const std::string first = client.ReadUntil("data: {", 30'000);
  ASSERT_NE(first.find("data: {"), std::string::npos) << first << s.Output();
  client.Close();
  const auto closed = std::chrono::steady_clock::now();

  // Its worker lets go of the call within a second.
  bool freed = WaitUntil(
      [&] {
        const Resp pool = s.Send("GET", "/v1/workers");
        for (const Json& w : pool.body["data"]) {
          if (!w["sampling"].is_null()) return false;
        }
        return true;
      },
      10, 10);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - closed).count();
  ASSERT_TRUE(freed) << s.Output();
  EXPECT_LT(ms, 1000) << "the call ran on after its client left";
  // Only what was sampled is billed: far fewer than the 1000 asked for.
  int64_t billed = 0;
  WaitUntil(
      [&] {
        billed = SampledTokens(s) - before;
        return billed > 0;
      },
      10, 50);
  EXPECT_GT(billed, 0);
  EXPECT_LT(billed, full_tokens / 2) << "tokens billed for the cancelled call; run to its end: "
                                     << full_tokens;
  // The worker takes the next call.
  Resp next = s.Send("POST", "/v1/completions",
                     {{"model", "burst-small"}, {"prompt", "A cat is"}, {"max_tokens", 2}});
  EXPECT_EQ(next.status, 200) << next.Describe();
}

}  // namespace
}  // namespace burst::e2e
