#include "core/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/status.h"

namespace burst {
namespace {

// A label value as the text format quotes it: backslash, quote and newline escaped.
std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string LabelText(const MetricLabels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) out += (out.empty() ? "" : ",") + k + "=\"" + Escape(v) + "\"";
  return out;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  // The shortest text that reads back as the same double (0.005, not 0.0050000000000000001).
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// `name{labels}` or `name{labels,extra}`; no braces when there are none.
std::string SeriesName(const std::string& name, const std::string& labels, const std::string& extra = "") {
  const std::string all = labels.empty() ? extra : extra.empty() ? labels : labels + "," + extra;
  return all.empty() ? name : name + "{" + all + "}";
}

}  // namespace

Metrics& Metrics::Default() {
  // Never destroyed: threads may count while the process exits.
  static Metrics* m = [] {
    auto* r = new Metrics();
    DeclareBurstMetrics(*r);
    return r;
  }();
  return *m;
}

void Metrics::Declare(const std::string& name, MetricType type, const std::string& help,
                      std::vector<double> buckets) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    if (it->second.type != type) throw Error(Code::kInternal, "metric " + name + " declared with two types");
    return;
  }
  Family f;
  f.type = type;
  f.help = help;
  f.buckets = std::move(buckets);
  families_.emplace(name, std::move(f));
  order_.push_back(name);
}

Metrics::Family* Metrics::FamilyOf(const std::string& name, MetricType type) {
  auto it = families_.find(name);
  if (it == families_.end() || it->second.type != type) {
    // A bug in the code that counts: said once, and the count dropped (a
    // metric never takes down the work it measures).
    if (misused_.insert(name).second) {
      std::fprintf(stderr, "burst: metric %s is not declared as a %s; its counts are dropped\n", name.c_str(),
                   TypeName(type));
    }
    return nullptr;
  }
  return &it->second;
}

Metrics::Series& Metrics::SeriesOf(Family& f, const MetricLabels& labels) {
  std::string key = LabelText(labels);
  auto it = f.series.find(key);
  if (it != f.series.end()) return it->second;
  if (f.series.size() >= kMaxSeries) key = LabelText({{"overflow", "true"}});
  Series& s = f.series[key];
  if (f.type == MetricType::kHistogram && s.counts.empty()) s.counts.assign(f.buckets.size() + 1, 0);
  return s;
}

void Metrics::Add(const std::string& name, const MetricLabels& labels, double v) {
  if (!(v >= 0)) return;  // a counter only goes up (and NaN is no count)
  std::lock_guard<std::mutex> lock(mu_);
  if (Family* f = FamilyOf(name, MetricType::kCounter)) SeriesOf(*f, labels).value += v;
}

void Metrics::Set(const std::string& name, const MetricLabels& labels, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Family* f = FamilyOf(name, MetricType::kGauge)) SeriesOf(*f, labels).value = v;
}

void Metrics::Observe(const std::string& name, const MetricLabels& labels, double v) {
  if (std::isnan(v)) return;
  std::lock_guard<std::mutex> lock(mu_);
  Family* fp = FamilyOf(name, MetricType::kHistogram);
  if (!fp) return;
  Family& f = *fp;
  Series& s = SeriesOf(f, labels);
  size_t b = 0;
  while (b < f.buckets.size() && v > f.buckets[b]) ++b;
  ++s.counts[b];
  ++s.count;
  s.value += v;
}

void Metrics::ClearGauge(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Family* f = FamilyOf(name, MetricType::kGauge)) f->series.clear();
}

double Metrics::Value(const std::string& name, const MetricLabels& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto f = families_.find(name);
  if (f == families_.end()) return 0;
  auto s = f->second.series.find(LabelText(labels));
  if (s == f->second.series.end()) return 0;
  return f->second.type == MetricType::kHistogram ? static_cast<double>(s->second.count) : s->second.value;
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const std::string& name : order_) {
    const Family& f = families_.at(name);
    out += "# HELP " + name + " " + f.help + "\n";
    out += "# TYPE " + name + " " + TypeName(f.type) + "\n";
    for (const auto& [labels, s] : f.series) {
      if (f.type != MetricType::kHistogram) {
        out += SeriesName(name, labels) + " " + Number(s.value) + "\n";
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t b = 0; b <= f.buckets.size(); ++b) {
        cumulative += s.counts[b];
        const std::string le = b < f.buckets.size() ? Number(f.buckets[b]) : "+Inf";
        out += SeriesName(name + "_bucket", labels, "le=\"" + le + "\"") + " " + std::to_string(cumulative) +
               "\n";
      }
      out += SeriesName(name + "_sum", labels) + " " + Number(s.value) + "\n";
      out += SeriesName(name + "_count", labels) + " " + std::to_string(s.count) + "\n";
    }
  }
  return out;
}

std::vector<double> LatencyBuckets() {
  return {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

void DeclareBurstMetrics(Metrics& m) {
  m.Declare("burst_http_requests_total", MetricType::kCounter,
            "HTTP requests answered, by method, route pattern and status");
  m.Declare("burst_http_request_duration_seconds", MetricType::kHistogram,
            "Time from a request's head to its answer (a stream: to its end), by route pattern",
            LatencyBuckets());
  m.Declare("burst_jobs_queued", MetricType::kGauge, "Jobs waiting for a worker, by organisation");
  m.Declare("burst_jobs_running", MetricType::kGauge, "Jobs running, by organisation");
  m.Declare("burst_workers", MetricType::kGauge, "Worker processes, by state and device");
  m.Declare("burst_gpus", MetricType::kGauge, "The pool's GPUs, by type, held by a worker or free");
  m.Declare("burst_worker_cold_start_seconds", MetricType::kHistogram,
            "From a worker's start to its registration with the control plane", LatencyBuckets());
  m.Declare("burst_dispatch_seconds", MetricType::kHistogram,
            "From submission to a worker taking the work, by kind (job, sample)", LatencyBuckets());
  m.Declare("burst_lease_expiries_total", MetricType::kCounter,
            "Workers whose lease expired (no heartbeat in time)");
  m.Declare("burst_job_retries_total", MetricType::kCounter, "Job attempts that failed and were requeued");
  m.Declare("burst_checkpoints_total", MetricType::kCounter, "Checkpoints saved by workers");
  m.Declare("burst_checkpoint_bytes_total", MetricType::kCounter,
            "Bytes of checkpoints uploaded to the store");
  m.Declare("burst_checkpoint_upload_seconds", MetricType::kHistogram,
            "Time a worker took to upload one checkpoint", LatencyBuckets());
  m.Declare("burst_billed_seconds_total", MetricType::kCounter,
            "Worker seconds written to the usage ledger, by line and scope");
  m.Declare("burst_billed_tokens_total", MetricType::kCounter,
            "Tokens charged in the usage ledger, by line and scope");
  m.Declare("burst_billed_dollars_total", MetricType::kCounter,
            "Cost written to the usage ledger, by line and scope");
}

}  // namespace burst
