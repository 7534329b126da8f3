// The worker's side of the workers' protocol (/internal/v1; docs/api.md,
// "Workers"): JSON POSTs to the control plane with the worker's token, and
// the clock stamps of the worker's log lines.
//
// The control plane is one or more URLs (BURST_URL, comma-separated: every
// control plane sharing the database). Requests go to the one that answered
// last; a connection error or a standby's 503 moves on to the next, so the
// worker follows the leader after a failover.
//
// Thread-safety: a ControlPlane may be shared (calls are serialised on one
// connection per URL); threads that must not wait on each other (the
// heartbeat, a stream's sender) each hold their own.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/json.h"

namespace httplib {
class Client;
}

namespace burst {

// "2026-12-01 19:34:01" (UTC), for the worker's log lines.
std::string LogStamp();
// Seconds since `t` on the steady clock.
inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct Reply {
  int status = 0;  // 0: no answer (connection error)
  Json body;
  std::string error;
};

class ControlPlane {
 public:
  ControlPlane(const std::string& urls, const std::string& token);
  ~ControlPlane();

  // POST /internal/v1/{what}; a 4xx/5xx reply carries the error's message.
  Reply Post(const std::string& what, const Json& body);
  // Retries connection errors and 5xx with backoff for up to `patience_s`;
  // returns the last reply.
  Reply PostRetrying(const std::string& what, const Json& body, double patience_s = 600);

 private:
  std::mutex mu_;
  std::vector<std::string> urls_;
  std::vector<std::unique_ptr<httplib::Client>> http_;
  size_t cur_ = 0;             // GUARDED_BY(mu_)
  std::string authorization_;  // "Bearer <worker token>"
};

}  // namespace burst
