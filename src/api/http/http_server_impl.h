// HttpServer::Impl: the HTTP server's state, shared by the I/O thread
// (connections, heads, bodies, deadlines, parked requests) and the pool
// threads (admission, handlers, responses), each in a source file of its
// own (api/http/README.md).
//
// Thread-safety: fields marked "I/O thread only" are touched by Serve's
// thread alone; a connection in kBusy belongs to the one pool thread running
// it, and goes back to the I/O thread through PostBack (under back_mu).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/http/http_server.h"
#include "core/fair_pool.h"
#include "core/ids.h"

namespace burst::http {

// The body's declared length is over its route's limit (a chunked body is
// counted as it arrives instead).
inline bool TooLarge(const Request& req, const Route& route) { return req.content_length > route.max_body; }
inline std::string TooLargeMessage(const Request& req, const Route& route) {
  return "request body of " + std::to_string(req.content_length) + " bytes is over this route's limit of " +
         std::to_string(route.max_body) + " bytes";
}

struct HttpServer::Impl {
  enum class State { kIdle, kHead, kBody, kBusy, kParked, kLinger };
  // What a pool thread hands a connection back for.
  enum class Next { kReadBody, kKeepAlive, kClose, kLinger, kPark };

  struct Conn {
    int fd = -1;
    uint64_t serial = 0;  // unique for the server's life (wakes find parked requests by it)
    std::string address;
    State state = State::kIdle;
    std::string in;        // bytes received and not yet consumed
    size_t scanned = 0;    // bytes of `in` already searched for the head's end
    int64_t since_ms = 0;  // opened; entered kIdle, kParked or kLinger; first byte of a later head
    bool fresh = true;     // no request yet: its first head's deadline runs from the opening
    int64_t body_start_ms = 0;
    int64_t body_received = 0;
    int64_t lingered = 0;  // bytes discarded while lingering
    Request req;
    const Route* route = nullptr;
    std::optional<ChunkedDecoder> chunked;
    int64_t body_left = 0;  // Content-Length bytes still to come
    bool admitted = false;
    // Whom the request counts against (core/fair_pool.h), and the body bytes it holds
    // of that tenant's shares.
    std::string tenant;
    int64_t mem_held = 0, spool_held = 0;
    std::shared_ptr<Park> park;  // kParked: what resumes it
    int64_t park_until_ms = 0;
    std::chrono::steady_clock::time_point head_at;  // when the current request's head was in
    std::string request_id;
  };
  struct Address {
    int open = 0;
    int idle = 0;  // in kIdle or kHead: no request of theirs in progress
  };
  // Where a Waker's notification goes; outlives the server if a waker does.
  struct WakeSink {
    std::mutex mu;
    Impl* impl = nullptr;  // GUARDED_BY(mu); null once the server is gone
  };

  Router router;
  ServerLimits limits;
  ErrorRenderer render_error;
  RequestObserver observer;
  // Request ids: this server's random prefix and a count.
  const std::string id_prefix = "req-" + NewId("x").substr(2, 12) + "-";
  std::atomic<uint64_t> next_request{0};
  uint64_t next_serial = 0;  // I/O thread only
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  int bound_port = -1;
  std::atomic<bool> stopping{false};
  std::unordered_map<int, std::unique_ptr<Conn>> conns;  // I/O thread only
  std::unordered_map<std::string, Address> addresses;    // I/O thread only
  std::unordered_map<uint64_t, Conn*> parked;            // I/O thread only, by serial
  // Per tenant, I/O thread only: body bytes in memory and spooled, parked requests.
  std::unordered_map<std::string, int64_t> mem_by_tenant, spool_by_tenant, parked_by_tenant;
  std::mutex back_mu;
  std::vector<std::pair<Conn*, Next>> back;  // GUARDED_BY(back_mu)
  std::vector<uint64_t> wakes;               // GUARDED_BY(back_mu): serials of parked requests woken
  std::shared_ptr<WakeSink> sink = std::make_shared<WakeSink>();
  FairPool api_pool, internal_pool;
  int64_t accept_paused_until = 0;  // I/O thread only; 0: accepting
  std::atomic<int64_t> n_open{0}, n_accepted{0}, n_refused{0}, n_timed_out{0}, n_rejected{0}, n_handled{0},
      n_parked{0};

  Impl(Router r, ServerLimits l, ErrorRenderer e);
  ~Impl();

  FairPool& PoolOf(const Conn* c);

  std::string ErrorBytes(int status, const std::string& message);

  // ---- I/O thread ------------------------------------------------------

  // Watched for bytes (default) or, parked, for hang-ups only.
  void Watch(Conn* c, bool parked = false);
  void Unwatch(Conn* c);

  static bool Idle(State s) { return s == State::kIdle || s == State::kHead; }
  // Every state change goes here: it keeps the addresses' idle counts.
  void SetState(Conn* c, State s);

  // The body bytes the connection's request holds go back to its tenant.
  void ReleaseBody(Conn* c);

  void Unpark(Conn* c);

  void Close(Conn* c);

  // The oldest connection idle past the grace of `address` ("": of the
  // address holding the most such), or nullptr.
  Conn* OldestIdle(const std::string& address, int64_t now);

  void Accept();

  // Tells the observer of an answered request (it must not take the server down).
  void Observe(Conn* c, const Response& res, bool admitted);

  // A new request's id and start (its head is in, or it is refused before that).
  void Begin(Conn* c);

  // Answers before the body (or without a request), then reads and drops
  // what the client still sends for a moment so it sees the answer.
  void Reject(Conn* c, int status, const std::string& message, const std::string& allow = "");

  // Hands the connection to a pool thread: its admission (before the
  // body, as the client's address) or its handler (as its tenant).
  void Dispatch(Conn* c);

  // The tenant's share of bytes in flight: false (and the request refused)
  // when `more` bytes would take it past `limit`.
  bool Hold(Conn* c, std::unordered_map<std::string, int64_t>& by, int64_t& held, int64_t more, int64_t limit,
            const char* what);
  bool HoldBody(Conn* c, int64_t more);

  void StartBody(Conn* c);

  // Body bytes in, to memory or to the spool file.
  bool Keep(Conn* c, std::string_view data);

  void ConsumeBody(Conn* c);

  // The head is in: route it, check its size from its headers, and hand it
  // to a pool thread for admission before any body byte is read.
  void AfterHead(Conn* c);

  void ProcessInput(Conn* c);

  void OnReadable(Conn* c);

  // Deadlines: a head that takes too long (from the opening, for a
  // connection's first), a body slower than the minimum rate, an idle
  // kept-alive connection, a parked request's wait, a lingering close.
  void Sweep();

  // A parked request's wait is over: its resume runs on a pool thread.
  void Resume(Conn* c, bool timed_out);

  // A handler parked its request: it waits here, watched for the client
  // leaving only (bytes it pipelines stay in the socket until it is answered).
  void Wait(Conn* c);

  void TakeBack();

  // ---- pool threads ----------------------------------------------------

  void PostBack(Conn* c, Next next);

  // Any thread (a Waker's): the parked request `serial` may go on.
  void PostWake(uint64_t serial);

  // Answers a request refused after its head, and lingers.
  void Refuse(Conn* c, Response& res, bool admitted);

  // The route's admission check, before any body byte; then the body (back
  // on the I/O thread) or, without one, the handler as the request's tenant.
  void RunAdmit(Conn* c);

  void RunHandler(Conn* c);

  void RunResume(Conn* c, bool timed_out);

  // Writes the handler's answer (or parks the request).
  void Respond(Conn* c, Response& res);
};

}  // namespace burst::http
