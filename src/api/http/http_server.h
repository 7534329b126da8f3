// HttpServer: HTTP/1.1 for `burst serve`, built so that no client can stall
// or bloat it.
//
// One I/O thread owns every connection that is waiting for bytes: it
// accepts (refusing past a total and a per-address cap, and closing the
// oldest idle connections of the address holding the most when full), reads
// request heads under a size limit and a deadline that starts when the
// connection opens, and reads bodies under the route's size limit and a
// minimum rate, all without blocking, so a slow or silent client costs a
// file descriptor and a small buffer, never a thread.
//
// Requests run on pools of threads that grow on demand: one for the API and
// one of its own for the workers' protocol (Lane), so worker heartbeats and
// leases never queue behind API traffic. Within a pool each tenant (the
// caller's organisation once admitted, its address before) runs at most
// max_threads_per_tenant requests at once and waiting tenants are served in
// turn (core/fair_pool.h). A request's head goes first to the route's admission check
// (the API key), before any body byte is read; then its body is read, into
// memory within the tenant's share of body bytes in flight, or into a
// temporary file for routes that spool (uploads); then the handler runs and
// writes its response (buffered or streamed) on its thread. A handler may
// park its request instead (message.h, Park): the connection then waits
// with no thread until woken or timed out, and its resume function answers.
// Refused requests are answered and the connection closed after a short
// lingering read, so the client sees the answer rather than a reset.
//
// Thread-safety: Bind, then Serve on one thread; Stop from any thread.
// Handlers run on pool threads, several at once.
#pragma once

#include <any>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "api/http/request_parser.h"
#include "api/http/router.h"
#include "core/status.h"

namespace burst::http {

struct ServerLimits {
  HeadLimits head;
  // From a connection's opening, or a kept-alive one's next first byte, to
  // the end of the request's head.
  int64_t head_timeout_ms = 10'000;
  int64_t idle_timeout_ms = 60'000;  // a kept-alive connection with no request
  int64_t body_grace_ms = 5'000;     // before the minimum body rate applies
  int64_t min_body_bytes_per_s = 16 << 10;
  int64_t write_timeout_ms = 30'000;  // a client that does not take its response
  int64_t linger_ms = 2'000;          // reading what a refused client still sends
  int max_connections = 1024;
  int max_connections_per_address = 64;
  // Connections of one address between requests (or before their first):
  // past it, that address's oldest idle connections are closed, once idle
  // for idle_grace_ms (a client opening many at once gets to use them). A
  // full server likewise closes an idle one to take a new connection.
  int max_idle_per_address = 16;
  int64_t idle_grace_ms = 1'000;
  int max_threads = 64;             // the API's pool
  int max_threads_per_tenant = 16;  // an organisation's (or address's) requests running at once
  int max_internal_threads = 64;    // the workers' protocol's pool
  // Request bodies one tenant may have in memory at once (reading, queued,
  // running), and spooled to disk; past either the request is 429.
  int64_t max_body_memory_per_tenant = 64LL << 20;
  int64_t max_spool_per_tenant = 2LL << 30;
  std::string spool_dir;            // temporary files of spooled bodies ("" = /tmp)
  int max_parked_per_tenant = 256;  // parked requests (long polls) of one tenant
};

// Fills a response for an error the server answers itself (400, 404, 408,
// 413, 431, 500, 503...), so it has the application's error shape.
using ErrorRenderer = std::function<void(Response&, int status, const std::string& message)>;

struct ServerStats {
  int64_t open = 0;       // connections open now
  int64_t accepted = 0;   // connections accepted in all
  int64_t refused = 0;    // connections refused at accept (caps)
  int64_t timed_out = 0;  // closed for a head deadline or a slow body
  int64_t rejected = 0;   // requests answered before their body (admission, limits, malformed)
  int64_t handled = 0;    // requests that reached their handler
  int64_t threads = 0;    // pool threads started (both pools)
  int64_t parked = 0;     // requests parked now
};

// One answered request, as the observer sees it (access logs, metrics):
// `route` is the pattern that matched ("" when none did); `seconds` runs
// from the end of the head to the end of the answer (a stream's last byte).
// `principal` is the request's (valid during the call; empty when refused
// before admission).
struct RequestRecord {
  std::string method, route, path, request_id, remote_address;
  int status = 0;
  double seconds = 0;
  const std::any* principal = nullptr;
};
using RequestObserver = std::function<void(const RequestRecord&)>;

class HttpServer {
 public:
  HttpServer(Router router, const ServerLimits& limits, ErrorRenderer render_error);
  ~HttpServer();

  // Listens on host:port (0: any free port); kUnavailable when taken.
  Status Bind(const std::string& host, int port);
  int port() const;
  // Serves until Stop(); returns after every running handler has finished.
  void Serve();
  void Stop();
  ServerStats stats() const;
  // Called after each request is answered, on the thread that answered it
  // (a pool thread, or the I/O thread for requests refused there): keep it
  // quick. Every answer carries an X-Request-Id header (RequestRecord's).
  // Set before Serve.
  void SetObserver(RequestObserver observer);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace burst::http
