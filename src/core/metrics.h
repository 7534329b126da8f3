// Operator metrics in Prometheus's text exposition format (version 0.0.4),
// served by `burst serve` at GET /metrics.
//
// One process-wide registry (Metrics::Default), as Prometheus clients keep
// one: the HTTP layer, the runtime and the API count into it where things
// happen, and the scrape adds gauges read at that moment (queue depth,
// workers by state). Families are declared once by name, type and help
// (Burst's in DeclareBurstMetrics, when Default is first used); counting
// into an undeclared family is a bug, said once on stderr with the count
// dropped, never an exception in the work it measures. A family holds at
// most kMaxSeries label sets; past that, new
// label sets are counted in one series with the label "overflow" so a
// flood of distinct values cannot bloat the server.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace burst {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

class Metrics {
 public:
  static constexpr size_t kMaxSeries = 2000;

  static Metrics& Default();

  // Declares a family (again with the same type: a no-op). Histograms take
  // their bucket upper bounds, increasing; +Inf is added.
  void Declare(const std::string& name, MetricType type, const std::string& help,
               std::vector<double> buckets = {});
  // Counter: adds v (>= 0). Gauge: sets v.
  void Add(const std::string& name, const MetricLabels& labels = {}, double v = 1);
  void Set(const std::string& name, const MetricLabels& labels, double v);
  // Histogram: one observation.
  void Observe(const std::string& name, const MetricLabels& labels, double v);
  // Drops a gauge family's series (before a scrape sets them afresh).
  void ClearGauge(const std::string& name);

  // The value of one series (a histogram's: its count), 0 when none: for tests.
  double Value(const std::string& name, const MetricLabels& labels = {}) const;

  // Every family in the text format, families in declaration order.
  std::string Render() const;

 private:
  struct Series {
    double value = 0;              // counter, gauge; a histogram's sum
    std::vector<uint64_t> counts;  // a histogram's per bucket (not cumulative), +Inf last
    uint64_t count = 0;
  };
  struct Family {
    MetricType type = MetricType::kCounter;
    std::string help;
    std::vector<double> buckets;
    std::map<std::string, Series> series;  // by rendered label set
  };
  Series& SeriesOf(Family& f, const MetricLabels& labels);
  Family* FamilyOf(const std::string& name, MetricType type);  // null (said once) when undeclared

  mutable std::mutex mu_;
  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
  std::set<std::string> misused_;
};

// Declares Burst's families (docs/deploy.md, "Metrics and logs", lists them).
void DeclareBurstMetrics(Metrics& m);

// Bucket bounds in seconds for latencies from milliseconds to minutes.
std::vector<double> LatencyBuckets();

}  // namespace burst
