// The API server in process: where a client's own bytes could land beyond
// its request. Not in the metrics' labels (an unauthenticated flood must not
// crowd out real traffic).
#include <random>
#include <string>

#include "api/server_test_util.h"
#include "core/metrics.h"

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
  EXPECT_TRUE(Counted("burst_http_requests_total", {{"method", "GET"}, {"route", "/v1/files"}, {"status", "200"}}))
      << "the real request was not counted under its own labels";
  EXPECT_LE(SeriesOf("burst_http_requests_total") - requests_before, 5);
  EXPECT_LE(SeriesOf("burst_http_request_duration_seconds_count") - durations_before, 2);
  const MetricLabels flood_labels = {{"method", "other"}, {"route", "unmatched"}, {"status", "404"}};
  EXPECT_GT(Metrics::Default().Value("burst_http_requests_total", flood_labels), 0);
  EXPECT_EQ(Metrics::Default().Value("burst_http_requests_total", {{"overflow", "true"}}), 0);
}

}  // namespace
}  // namespace burst
