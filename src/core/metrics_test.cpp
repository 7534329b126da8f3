// The metrics registry (core/metrics.h) renders Prometheus's text format:
// HELP and TYPE per family, escaped label values, cumulative histogram
// buckets with +Inf, _sum and _count; counters only go up; a flood of label
// sets is capped; counting into an undeclared family is an error.
#include "core/metrics.h"

#include <gtest/gtest.h>

#include "core/status.h"

namespace burst {
namespace {

TEST(Metrics, RendersTheTextFormat) {
  Metrics m;
  m.Declare("t_requests_total", MetricType::kCounter, "Requests");
  m.Declare("t_queue", MetricType::kGauge, "Queue");
  m.Declare("t_latency_seconds", MetricType::kHistogram, "Latency", {0.1, 1});
  m.Add("t_requests_total", {{"route", "/v1/a"}, {"status", "200"}});
  m.Add("t_requests_total", {{"route", "/v1/a"}, {"status", "200"}}, 2);
  m.Add("t_requests_total", {{"route", "say \"hi\"\\\n"}, {"status", "500"}});
  m.Add("t_requests_total", {{"route", "/v1/a"}, {"status", "200"}}, -5);  // ignored: counters only go up
  m.Set("t_queue", {{"org", "o1"}}, 3);
  m.Set("t_queue", {{"org", "o1"}}, 2);
  for (double v : {0.05, 0.1, 0.5, 7.0}) m.Observe("t_latency_seconds", {}, v);
  EXPECT_EQ(m.Value("t_requests_total", {{"route", "/v1/a"}, {"status", "200"}}), 3);
  EXPECT_EQ(m.Value("t_queue", {{"org", "o1"}}), 2);
  EXPECT_EQ(m.Value("t_latency_seconds"), 4);
  EXPECT_EQ(m.Render(),
            "# HELP t_requests_total Requests\n"
            "# TYPE t_requests_total counter\n"
            "t_requests_total{route=\"/v1/a\",status=\"200\"} 3\n"
            "t_requests_total{route=\"say \\\"hi\\\"\\\\\\n\",status=\"500\"} 1\n"
            "# HELP t_queue Queue\n"
            "# TYPE t_queue gauge\n"
            "t_queue{org=\"o1\"} 2\n"
            "# HELP t_latency_seconds Latency\n"
            "# TYPE t_latency_seconds histogram\n"
            "t_latency_seconds_bucket{le=\"0.1\"} 2\n"
            "t_latency_seconds_bucket{le=\"1\"} 3\n"
            "t_latency_seconds_bucket{le=\"+Inf\"} 4\n"
            "t_latency_seconds_sum 7.65\n"
            "t_latency_seconds_count 4\n");
  m.ClearGauge("t_queue");
  EXPECT_EQ(m.Value("t_queue", {{"org", "o1"}}), 0);
}

TEST(Metrics, UndeclaredOrMistypedFamiliesCountNothing) {
  Metrics m;
  m.Declare("t_total", MetricType::kCounter, "x");
  EXPECT_NO_THROW(m.Add("t_missing"));
  EXPECT_NO_THROW(m.Set("t_total", {}, 1));
  EXPECT_EQ(m.Value("t_total"), 0);
  EXPECT_EQ(m.Render(), "# HELP t_total x\n# TYPE t_total counter\n");
  EXPECT_THROW(m.Declare("t_total", MetricType::kGauge, "x"), Error);
  EXPECT_NO_THROW(m.Declare("t_total", MetricType::kCounter, "again"));
}

TEST(Metrics, AFloodOfLabelSetsIsCapped) {
  Metrics m;
  m.Declare("t_total", MetricType::kCounter, "x");
  for (size_t i = 0; i < Metrics::kMaxSeries + 50; ++i) m.Add("t_total", {{"id", std::to_string(i)}});
  EXPECT_EQ(m.Value("t_total", {{"overflow", "true"}}), 50);
  const std::string text = m.Render();
  EXPECT_EQ(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')), Metrics::kMaxSeries + 1 + 2);
}

// Every family Burst counts into is declared in the default registry.
TEST(Metrics, BurstsFamiliesAreDeclared) {
  const std::string text = Metrics::Default().Render();
  for (const char* name :
       {"burst_http_requests_total", "burst_http_request_duration_seconds", "burst_jobs_queued",
        "burst_jobs_running", "burst_workers", "burst_gpus", "burst_worker_cold_start_seconds",
        "burst_dispatch_seconds", "burst_lease_expiries_total", "burst_job_retries_total",
        "burst_checkpoints_total", "burst_checkpoint_bytes_total", "burst_checkpoint_upload_seconds",
        "burst_billed_seconds_total", "burst_billed_tokens_total", "burst_billed_dollars_total"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace burst
