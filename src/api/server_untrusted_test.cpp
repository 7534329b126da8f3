// The API server in process: where a client's own bytes could land beyond
// its request. Not in the metrics' labels (an unauthenticated flood must not
// crowd out real traffic), and not in the links the server hands out (the
// Host header names whatever the client likes).
#include <random>
#include <string>

#include "api/server_test_util.h"
#include "core/metrics.h"
#include "store/keys.h"

namespace burst {
namespace {

// The series a metric family holds now.
int SeriesOf(const std::string& family) {
  const std::string text = Metrics::Default().Render();
  int n = 0;
  const std::string start = "\n" + family + "{";
  for (size_t at = text.find(start); at != std::string::npos; at = text.find(start, at + 1)) ++n;
  return n;
}

// Waits (up to 10 s) for a series to count something: the observer runs
// after the answer is sent.
bool Counted(const std::string& family, const MetricLabels& labels) {
  for (int i = 0; i < 1000; ++i) {
    if (Metrics::Default().Value(family, labels) > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string RandomWord(std::mt19937& rng, size_t length) {
  std::uniform_int_distribution<int> letter(0, 25);
  std::string w;
  for (size_t i = 0; i < length; ++i) w.push_back(static_cast<char>('A' + letter(rng)));
  return w;
}

// Made-up methods and paths, without a key, more of them than a family has
// series: the families stay a handful of series, and a real request still
// counts under its own method and route.
TEST_F(ApiServerTest, MadeUpMethodsAndPathsDoNotGrowTheMetrics) {
  Start();
  const int requests_before = SeriesOf("burst_http_requests_total");
  const int durations_before = SeriesOf("burst_http_request_duration_seconds_count");
  std::mt19937 rng(7);
  const int flood = static_cast<int>(Metrics::kMaxSeries) + 100;
  for (int i = 0; i < flood; ++i) {
    // Every third one a real path (answered 405), the rest made up (404).
    const std::string path = i % 3 == 0 ? "/v1/files" : "/" + RandomWord(rng, 10) + "/" + RandomWord(rng, 6);
    RawConn c(port_);
    ASSERT_TRUE(c.connected()) << i;
    // "X...": never a method the server knows; 4 to 16 letters (the parser's
    // limit), each one new.
    const std::string method = "X" + RandomWord(rng, 3 + i % 13);
    ASSERT_TRUE(c.Send(method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const int status = RawConn::StatusOf(c.Read(5000));
    ASSERT_TRUE(status == 404 || status == 405) << i << ": " << status;
  }
  auto files = Client(key_a_).Get("/v1/files");
  ASSERT_TRUE(files);
  ASSERT_EQ(files->status, 200);
  EXPECT_TRUE(
      Counted("burst_http_requests_total", {{"method", "GET"}, {"route", "/v1/files"}, {"status", "200"}}))
      << "the real request was not counted under its own labels";
  EXPECT_LE(SeriesOf("burst_http_requests_total") - requests_before, 5);
  EXPECT_LE(SeriesOf("burst_http_request_duration_seconds_count") - durations_before, 2);
  const MetricLabels flood_labels = {{"method", "other"}, {"route", "unmatched"}, {"status", "404"}};
  EXPECT_GT(Metrics::Default().Value("burst_http_requests_total", flood_labels), 0);
  EXPECT_EQ(Metrics::Default().Value("burst_http_requests_total", {{"overflow", "true"}}), 0);
}

class ArchiveLinkTest : public ApiServerTest {
 protected:
  // A training run of org a with a sampler checkpoint s1 in the store; its id.
  std::string RunWithCheckpoint() {
    auto c = Client(key_a_);
    auto session = c.Post("/api/v1/create_session", "{}", "application/json");
    EXPECT_TRUE(session && session->status == 200) << (session ? session->body : "no answer");
    const std::string session_id = Json::parse(session->body)["session_id"];
    const Json create = {
        {"session_id", session_id}, {"base_model", "burst-small"}, {"lora_config", {{"rank", 4}}}};
    auto model = c.Post("/api/v1/create_model", create.dump(), "application/json");
    EXPECT_TRUE(model && model->status == 200) << (model ? model->body : "no answer");
    std::string run = Json::parse(model->body)["model_id"];
    const std::string prefix = LoopCheckpointPrefix(LoopPrefix(org_a_, run), "sampler_weights", "s1");
    EXPECT_TRUE(store_->Put(prefix + "adapter_config.json", "{}").ok());
    EXPECT_TRUE(store_->Put(prefix + "manifest.json", "{}").ok());
    return run;
  }

  // The archive link the server hands out when asked with `host` as Host.
  std::string LinkAsked(const std::string& run, const std::string& host) {
    RawConn c(port_);
    const std::string path = "/api/v1/training_runs/" + run + "/checkpoints/sampler_weights/s1/archive";
    EXPECT_TRUE(c.Send("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + key_a_ +
                       "\r\nConnection: close\r\n\r\n"));
    const std::string answer = c.Read(5000);
    EXPECT_EQ(RawConn::StatusOf(answer), 200) << answer;
    const Json body = Json::parse(RawConn::BodyOf(answer), nullptr, false);
    return body.is_object() && body["url"].is_string() ? body["url"].get<std::string>() : "";
  }
};

// The link names the server as it is configured, never the request's Host.
TEST_F(ArchiveLinkTest, TheHostHeaderIsNotEchoedIntoTheLink) {
  Start();
  const std::string run = RunWithCheckpoint();
  const std::string url = LinkAsked(run, "evil.example");
  EXPECT_EQ(url.find("evil.example"), std::string::npos) << url;
  const std::string own = "http://127.0.0.1:" + std::to_string(port_) + "/api/v1/archives/";
  ASSERT_EQ(url.rfind(own, 0), 0u) << url;
  // And the link works.
  auto tar = httplib::Client("127.0.0.1", port_).Get(url.substr(url.find("/api/v1/archives/")));
  ASSERT_TRUE(tar);
  EXPECT_EQ(tar->status, 200) << tar->body;
}

TEST_F(ArchiveLinkTest, TheLinkStartsWithTheAdvertisedUrl) {
  opt_.advertise_url = "https://burst.example.org/";
  Start();
  const std::string url = LinkAsked(RunWithCheckpoint(), "evil.example");
  EXPECT_EQ(url.rfind("https://burst.example.org/api/v1/archives/arch-", 0), 0u) << url;
}

}  // namespace
}  // namespace burst
