#include "api/observe.h"

#include <cstdio>

#include "api/context.h"
#include "api/respond.h"
#include "core/ids.h"
#include "core/metrics.h"
#include "core/utc.h"
#include "core/utf8.h"

namespace burst {
namespace {

std::string OrgOf(const http::RequestRecord& r) {
  if (r.principal == nullptr) return "";
  if (const ApiKey* key = std::any_cast<ApiKey>(r.principal)) return key->org_id;
  return "";
}

// A path as one token of a text line: control bytes and spaces (a decoded
// %0A or %20) cannot start a forged line or shift the fields.
std::string OneToken(const std::string& s) {
  std::string out = ToValidUtf8(s.empty() ? "-" : s);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

// The metrics' labels come from closed sets, never from the request's
// bytes: anyone may send made-up methods and paths without a key, and each
// new value would be a series of its own until the family's cap, after
// which real traffic lands in the overflow series.
std::string MethodLabel(const std::string& method) {
  for (const char* known : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    if (method == known) return method;
  }
  return "other";
}
// The pattern the router matched (patterns are the server's own), else one value.
std::string RouteLabel(const std::string& route) { return route.empty() ? "unmatched" : route; }
std::string StatusLabel(int status) {
  return status >= 100 && status <= 599 ? std::to_string(status) : "other";
}

}  // namespace

std::string AccessLogLine(const http::RequestRecord& r, LogFormat format) {
  if (r.route.rfind("/internal/", 0) == 0 && r.status < 400) return "";  // the workers' polls
  const std::string org = OrgOf(r);
  const double ms = r.seconds * 1000.0;
  if (format == LogFormat::kJson) {
    return DumpJson({{"time", UtcNow(kUtcIso8601)},
                     {"event", "access"},
                     {"method", r.method},
                     {"route", r.route.empty() ? Json() : Json(r.route)},
                     {"path", r.path},
                     {"status", r.status},
                     {"duration_ms", static_cast<double>(static_cast<int64_t>(ms * 1000)) / 1000.0},
                     {"org", org.empty() ? Json() : Json(org)},
                     {"request_id", r.request_id},
                     {"remote", r.remote_address}});
  }
  char dur[32];
  std::snprintf(dur, sizeof dur, "%.1fms", ms);
  return "burst serve: access " + UtcNow(kUtcIso8601) + " " + OneToken(r.method) + " " + OneToken(r.path) +
         " " + std::to_string(r.status) + " " + dur + " org=" + (org.empty() ? "-" : org) +
         " id=" + r.request_id + " remote=" + r.remote_address;
}

http::RequestObserver AccessObserver(LogFormat format) {
  return [format](const http::RequestRecord& r) {
    Metrics& m = Metrics::Default();
    const std::string route = RouteLabel(r.route);
    m.Add("burst_http_requests_total",
          {{"method", MethodLabel(r.method)}, {"route", route}, {"status", StatusLabel(r.status)}});
    m.Observe("burst_http_request_duration_seconds", {{"route", route}}, r.seconds);
    const std::string line = AccessLogLine(r, format);
    if (line.empty()) return;
    std::fprintf(stdout, "%s\n", line.c_str());  // one write per line: lines from threads do not interleave
    std::fflush(stdout);
  };
}

void AddMetricsRoute(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  routes.Public("GET", "/metrics", [c](http::Request& req, http::Response& res) {
    const std::string& token = c->opt.metrics_token;
    if (token.empty() || !SameSecret(BearerToken(req), token)) {
      return SendStatus(res,
                        Status(Code::kUnauthenticated,
                               "GET /metrics needs \"Authorization: Bearer <metrics token>\" (the server's "
                               "DATA/metrics.token)",
                               "authorization"));
    }
    Metrics& m = Metrics::Default();
    const Runtime::Gauges g = c->rt.ReadGauges();
    m.ClearGauge("burst_jobs_queued");
    m.ClearGauge("burst_jobs_running");
    m.ClearGauge("burst_workers");
    for (const auto& [org, n] : g.queued_by_org)
      m.Set("burst_jobs_queued", {{"org", org}}, static_cast<double>(n));
    for (const auto& [org, n] : g.running_by_org)
      m.Set("burst_jobs_running", {{"org", org}}, static_cast<double>(n));
    for (const auto& [key, n] : g.workers_by_state_device)
      m.Set("burst_workers", {{"state", key.first}, {"device", key.second}}, static_cast<double>(n));
    m.ClearGauge("burst_gpus");
    for (const auto& [key, n] : g.gpus_by_type_state)
      m.Set("burst_gpus", {{"type", key.first}, {"state", key.second}}, static_cast<double>(n));
    res.set_content(m.Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

}  // namespace burst
