// What operators watch: an access log line per answered request and the
// Prometheus metrics at GET /metrics (core/metrics.h; docs/operations.md).
//
// The access log goes to stdout as `burst serve: access ...` text or, with
// `--log-format json`, one JSON object a line: time, method, route (the
// pattern, so ids do not explode a log index), path, status, duration_ms,
// org, request_id, remote. The workers' own protocol (/internal) is logged
// only when it fails: it polls several times a second.
//
// Requests are counted by method (GET, HEAD, POST, PUT, DELETE, PATCH,
// OPTIONS, else "other"), route pattern ("unmatched" for none) and status:
// labels from closed sets, so no client can add series of its own.
//
// GET /metrics needs "Authorization: Bearer <metrics token>" (serve writes
// DATA/metrics.token at first start; Prometheus reads it with
// `authorization: {credentials_file: ...}`): the metrics name every
// organisation, so no API key may read them.
//
// Thread-safety: the observer runs on many threads at once.
#pragma once

#include <string>

#include "api/http/http_server.h"

namespace burst {

struct ApiContext;
class Routes;

enum class LogFormat { kText, kJson };

// One access-log line for `r` ("" for a request not logged).
std::string AccessLogLine(const http::RequestRecord& r, LogFormat format);
// Counts the request into the metrics and prints its access-log line.
http::RequestObserver AccessObserver(LogFormat format);
// GET /metrics (the scrape adds the gauges of the moment).
void AddMetricsRoute(ApiContext& ctx, Routes& routes);

}  // namespace burst
