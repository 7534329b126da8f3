#include "api/http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/http/pool.h"
#include "core/ids.h"

namespace burst::http {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Sends all of `data` on a non-blocking socket; false when the client is
// gone or takes nothing for `timeout_ms` (a large download on a slow link
// is fine as long as it moves).
bool WriteAll(int fd, std::string_view data, int64_t timeout_ms) {
  int64_t deadline = NowMs() + timeout_ms;
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      deadline = NowMs() + timeout_ms;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int64_t left = deadline - NowMs();
      if (left <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (r < 0 && errno != EINTR) return false;
      if (r > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
      continue;
    }
    return false;
  }
  return true;
}

// True when the peer has closed its side (or the socket failed), without
// blocking and without consuming anything it sent.
bool PeerClosed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  return false;
}

// A response body in chunked transfer encoding. A server that is stopping
// counts as a client gone, so a stream never holds up the shutdown.
class SocketStream : public StreamWriter {
 public:
  SocketStream(int fd, int64_t timeout_ms, const std::atomic<bool>& stopping)
      : fd_(fd), timeout_ms_(timeout_ms), stopping_(stopping) {}
  bool Write(std::string_view data) override {
    if (failed_) return false;
    if (data.empty()) return true;
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string frame;
    frame.reserve(data.size() + 32);
    frame.append(size).append(data).append("\r\n");
    if (!WriteAll(fd_, frame, timeout_ms_)) failed_ = true;
    return !failed_;
  }
  bool ClientGone() override {
    if (!failed_ && (stopping_ || PeerClosed(fd_))) failed_ = true;
    return failed_;
  }
  bool Finish() { return !failed_ && WriteAll(fd_, "0\r\n\r\n", timeout_ms_); }

 private:
  int fd_;
  int64_t timeout_ms_;
  const std::atomic<bool>& stopping_;
  bool failed_ = false;
};

std::string AddressOf(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof buf);
  } else if (ss.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, buf, sizeof buf);
  }
  return buf;
}

}  // namespace

// The body's declared length is over its route's limit (a chunked body is
// counted as it arrives instead).
bool TooLarge(const Request& req, const Route& route) { return req.content_length > route.max_body; }
std::string TooLargeMessage(const Request& req, const Route& route) {
  return "request body of " + std::to_string(req.content_length) + " bytes is over this route's limit of " +
         std::to_string(route.max_body) + " bytes";
}

struct HttpServer::Impl {
  enum class State { kIdle, kHead, kBody, kBusy, kLinger };
  // What a pool thread hands a connection back for.
  enum class Next { kReadBody, kKeepAlive, kClose, kLinger };

  struct Conn {
    int fd = -1;
    std::string address;
    State state = State::kIdle;
    std::string in;      // bytes received and not yet consumed
    size_t scanned = 0;  // bytes of `in` already searched for the head's end
    int64_t since_ms = 0;  // entered kIdle or kLinger; first byte of a head
    int64_t body_start_ms = 0;
    int64_t lingered = 0;  // bytes discarded while lingering
    Request req;
    const Route* route = nullptr;
    std::optional<ChunkedDecoder> chunked;
    int64_t body_left = 0;  // Content-Length bytes still to come
    bool admitted = false;
    std::chrono::steady_clock::time_point head_at;  // when the current request's head was in
    std::string request_id;
  };

  Router router;
  ServerLimits limits;
  ErrorRenderer render_error;
  RequestObserver observer;
  // Request ids: this server's random prefix and a count.
  const std::string id_prefix = "req-" + NewId("x").substr(2, 12) + "-";
  std::atomic<uint64_t> next_request{0};
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  int bound_port = -1;
  std::atomic<bool> stopping{false};
  std::unordered_map<int, std::unique_ptr<Conn>> conns;  // I/O thread only
  std::unordered_map<std::string, int> per_address;       // I/O thread only
  std::mutex back_mu;
  std::vector<std::pair<Conn*, Next>> back;  // GUARDED_BY(back_mu)
  Pool pool;
  int64_t accept_paused_until = 0;  // I/O thread only; 0: accepting
  std::atomic<int64_t> n_open{0}, n_accepted{0}, n_refused{0}, n_timed_out{0}, n_rejected{0}, n_handled{0};

  Impl(Router r, ServerLimits l, ErrorRenderer e)
      : router(std::move(r)), limits(l), render_error(std::move(e)), pool(l.max_threads) {}

  ~Impl() {
    for (int fd : {listen_fd, epoll_fd, wake_fd})
      if (fd >= 0) ::close(fd);
  }

  std::string ErrorBytes(int status, const std::string& message, Response* res_out = nullptr) {
    Response res;
    render_error(res, status, message);
    if (res_out) *res_out = res;
    return SerializeHead(res, /*close=*/true) + res.body;
  }

  // ---- I/O thread ------------------------------------------------------

  void Watch(Conn* c) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = c->fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev);
  }
  void Unwatch(Conn* c) { ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr); }

  void Close(Conn* c) {
    Unwatch(c);
    ::close(c->fd);
    if (--per_address[c->address] <= 0) per_address.erase(c->address);
    --n_open;
    conns.erase(c->fd);
  }

  void Accept() {
    while (true) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: stop watching the listening socket for a
          // moment (it would stay readable and spin the loop); the rest wait
          // in the backlog.
          ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
          accept_paused_until = NowMs() + 100;
        }
        return;
      }
      std::string address = AddressOf(ss);
      if (static_cast<int>(conns.size()) >= limits.max_connections ||
          per_address[address] >= limits.max_connections_per_address) {
        // Refused: answered (best effort, it is small) and closed at once.
        if (per_address[address] == 0) per_address.erase(address);
        const std::string bytes = ErrorBytes(503, "too many connections from " + address + "; retry later");
        [[maybe_unused]] ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        ++n_refused;
        continue;
      }
      int yes = 1;
      // Responses go out as soon as written (headers and body are separate
      // sends; with Nagle each small answer waited for a delayed ACK).
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      auto c = std::make_unique<Conn>();
      c->fd = fd;
      c->address = std::move(address);
      c->since_ms = NowMs();
      ++per_address[c->address];
      ++n_open;
      ++n_accepted;
      Watch(c.get());
      conns[fd] = std::move(c);
    }
  }

  // Tells the observer of an answered request (it must not take the server down).
  void Observe(Conn* c, const Response& res, bool admitted) {
    if (!observer) return;
    RequestRecord r;
    r.method = c->req.method;
    r.route = c->route ? c->route->pattern : "";
    r.path = c->req.path;
    r.request_id = c->request_id;
    r.remote_address = c->address;
    r.status = res.status;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c->head_at).count();
    if (admitted) r.principal = &c->req.principal;
    try {
      observer(r);
    } catch (...) {  // deliberately ignored: an observer's failure is not the request's
    }
  }

  // A new request's id and start (its head is in, or it is refused before that).
  void Begin(Conn* c) {
    c->head_at = std::chrono::steady_clock::now();
    c->request_id = id_prefix + std::to_string(next_request.fetch_add(1) + 1);
  }

  // Answers before the body (or without a request), then reads and drops
  // what the client still sends for a moment so it sees the answer.
  void Reject(Conn* c, int status, const std::string& message, const std::string& allow = "") {
    if (c->request_id.empty()) Begin(c);
    Response res;
    render_error(res, status, message);
    res.set_header("X-Request-Id", c->request_id);
    if (!allow.empty()) res.set_header("Allow", allow);
    const std::string bytes = SerializeHead(res, true) + res.body;
    [[maybe_unused]] ssize_t sent = ::send(c->fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(c->fd, SHUT_WR);
    c->state = State::kLinger;
    c->since_ms = NowMs();
    c->in.clear();
    ++n_rejected;
    Observe(c, res, false);
    c->request_id.clear();
  }

  void Dispatch(Conn* c) {
    Unwatch(c);
    c->state = State::kBusy;
    pool.Submit([this, c] { Run(c); });
  }

  void StartBody(Conn* c) {
    c->state = State::kBody;
    c->body_start_ms = NowMs();
    if (c->req.content_length > 0) c->req.body.reserve(static_cast<size_t>(c->req.content_length));
    ConsumeBody(c);
  }

  void ConsumeBody(Conn* c) {
    if (c->chunked) {
      const size_t used = c->chunked->Feed(c->in, &c->req.body);
      c->in.erase(0, used);
      if (c->chunked->failed()) return Reject(c, c->chunked->error().status, c->chunked->error().message);
      if (c->chunked->done()) Dispatch(c);
      return;
    }
    const size_t take = static_cast<size_t>(std::min<int64_t>(c->body_left, static_cast<int64_t>(c->in.size())));
    c->req.body.append(c->in, 0, take);
    c->in.erase(0, take);
    c->body_left -= static_cast<int64_t>(take);
    if (c->body_left == 0) Dispatch(c);
  }

  // The head is in: route it, check its size from its headers, and hand it
  // to a pool thread for admission before any body byte is read.
  void AfterHead(Conn* c) {
    Request& req = c->req;
    req.remote_address = c->address;
    c->route = nullptr;
    Begin(c);
    const Router::Match m = router.Find(req.method, req.path, &req.matches);
    if (!m.route) {
      if (m.status == 405) return Reject(c, 405, req.method + " is not allowed on " + req.path, m.allow);
      return Reject(c, 404, "no route " + req.method + " " + req.path);
    }
    c->route = m.route;
    // A route with an admission check (the API key) answers 401 before it
    // says anything about sizes; one without checks its limit here.
    if (!m.route->admit && TooLarge(req, *m.route)) return Reject(c, 413, TooLargeMessage(req, *m.route));
    c->body_left = std::max<int64_t>(0, req.content_length);
    c->chunked.reset();
    if (req.chunked) c->chunked.emplace(m.route->max_body);
    c->admitted = !m.route->admit;
    const bool has_body = req.chunked || req.content_length > 0;
    if (!c->admitted || !has_body) return Dispatch(c);
    if (req.expect_continue) {
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      [[maybe_unused]] ssize_t sent = ::send(c->fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    StartBody(c);
  }

  void ProcessInput(Conn* c) {
    if (c->state == State::kBody) return ConsumeBody(c);
    if (c->state != State::kIdle && c->state != State::kHead) return;
    if (c->in.empty()) return;
    if (c->state == State::kIdle) {
      c->state = State::kHead;
      c->since_ms = NowMs();
    }
    // Parse only once the blank line that ends the head has arrived, so a
    // client sending a byte at a time costs a search of its new bytes only.
    const size_t from = c->scanned > 3 ? c->scanned - 3 : 0;
    const bool complete = c->in.find("\n\n", from) != std::string::npos || c->in.find("\n\r\n", from) != std::string::npos;
    c->scanned = c->in.size();
    if (!complete) {
      if (c->in.size() > limits.head.max_head_bytes) {
        Reject(c, 431, "the request head is over the limit of " + std::to_string(limits.head.max_head_bytes) + " bytes");
      }
      return;
    }
    size_t consumed = 0;
    ParseError err;
    switch (ParseRequestHead(c->in, limits.head, &c->req, &consumed, &err)) {
      case HeadResult::kIncomplete:
        return;
      case HeadResult::kError:
        return Reject(c, err.status, err.message);
      case HeadResult::kDone:
        c->in.erase(0, consumed);
        c->scanned = 0;
        return AfterHead(c);
    }
  }

  void OnReadable(Conn* c) {
    char buf[64 << 10];
    for (int i = 0; i < 16 && c->state != State::kBusy; ++i) {
      const ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
      if (n == 0) return Close(c);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        return Close(c);
      }
      if (c->state == State::kLinger) {
        // Drained, not kept: a client that writes its whole (refused) body
        // before reading gets to read the answer instead of a reset.
        if ((c->lingered += n) > (8 << 20)) return Close(c);
        continue;
      }
      c->in.append(buf, static_cast<size_t>(n));
      ProcessInput(c);
      if (c->state == State::kLinger) c->in.clear();
    }
  }

  // Deadlines: a head that takes too long, a body slower than the minimum
  // rate, an idle kept-alive connection, a lingering close.
  void Sweep() {
    const int64_t now = NowMs();
    std::vector<Conn*> expired_idle, slow_head, slow_body, done_lingering;
    for (auto& [fd, c] : conns) {
      switch (c->state) {
        case State::kIdle:
          if (now - c->since_ms > limits.idle_timeout_ms) expired_idle.push_back(c.get());
          break;
        case State::kHead:
          if (now - c->since_ms > limits.head_timeout_ms) slow_head.push_back(c.get());
          break;
        case State::kBody: {
          const int64_t late = now - c->body_start_ms - limits.body_grace_ms;
          if (late > 0 && static_cast<int64_t>(c->req.body.size()) < limits.min_body_bytes_per_s * late / 1000) {
            slow_body.push_back(c.get());
          }
          break;
        }
        case State::kLinger:
          if (now - c->since_ms > limits.linger_ms) done_lingering.push_back(c.get());
          break;
        case State::kBusy:
          break;
      }
    }
    if (accept_paused_until && now >= accept_paused_until) {
      accept_paused_until = 0;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd;
      ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
    }
    for (Conn* c : expired_idle) Close(c);
    for (Conn* c : done_lingering) Close(c);
    for (Conn* c : slow_head) {
      ++n_timed_out;
      Reject(c, 408, "the request head did not arrive within " + std::to_string(limits.head_timeout_ms) + " ms");
    }
    for (Conn* c : slow_body) {
      ++n_timed_out;
      Reject(c, 408,
             "the request body arrived slower than " + std::to_string(limits.min_body_bytes_per_s) + " bytes/s");
    }
  }

  void TakeBack() {
    uint64_t n;
    [[maybe_unused]] ssize_t r = ::read(wake_fd, &n, sizeof n);
    std::vector<std::pair<Conn*, Next>> items;
    {
      std::lock_guard<std::mutex> lock(back_mu);
      items.swap(back);
    }
    for (auto [c, next] : items) {
      if (stopping || next == Next::kClose) {
        Close(c);
        continue;
      }
      Watch(c);
      if (next == Next::kLinger) {
        c->state = State::kLinger;
        c->since_ms = NowMs();
        c->in.clear();
      } else if (next == Next::kReadBody) {
        StartBody(c);
      } else {  // kKeepAlive: the next request, maybe already here (pipelined)
        c->req = Request();
        c->route = nullptr;
        c->chunked.reset();
        c->admitted = false;
        c->scanned = 0;
        c->state = State::kIdle;
        c->since_ms = NowMs();
        ProcessInput(c);
      }
    }
  }

  // ---- pool threads ----------------------------------------------------

  void PostBack(Conn* c, Next next) {
    {
      std::lock_guard<std::mutex> lock(back_mu);
      back.emplace_back(c, next);
    }
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_fd, &one, sizeof one);
  }

  void Run(Conn* c) {
    Request& req = c->req;
    Response res;
    const bool has_body = req.chunked || req.content_length > 0;
    if (!c->admitted) {
      bool ok = false;
      try {
        ok = c->route->admit(req, res);
      } catch (...) {
        res = Response();
        render_error(res, 500, "internal error while checking the request");
      }
      if (!ok) {
        ++n_rejected;
        res.set_header("X-Request-Id", c->request_id);
        const std::string bytes = SerializeHead(res, true) + res.body;
        if (WriteAll(c->fd, bytes, limits.write_timeout_ms)) ::shutdown(c->fd, SHUT_WR);
        Observe(c, res, false);
        return PostBack(c, Next::kLinger);
      }
      c->admitted = true;
      if (TooLarge(req, *c->route)) {
        res = Response();
        render_error(res, 413, TooLargeMessage(req, *c->route));
        ++n_rejected;
        res.set_header("X-Request-Id", c->request_id);
        const std::string bytes = SerializeHead(res, true) + res.body;
        if (WriteAll(c->fd, bytes, limits.write_timeout_ms)) ::shutdown(c->fd, SHUT_WR);
        Observe(c, res, true);
        return PostBack(c, Next::kLinger);
      }
      if (has_body && req.body.empty()) {
        if (req.expect_continue && !WriteAll(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", limits.write_timeout_ms)) {
          return PostBack(c, Next::kClose);
        }
        return PostBack(c, Next::kReadBody);
      }
    }
    ++n_handled;
    try {
      c->route->handler(req, res);
    } catch (...) {
      res = Response();
      render_error(res, 500, "internal error");
    }
    const bool keep = req.keep_alive && !res.close && !stopping;
    res.set_header("X-Request-Id", c->request_id);
    const std::string head = SerializeHead(res, !keep);
    bool ok;
    if (res.stream) {
      ok = WriteAll(c->fd, head, limits.write_timeout_ms);
      if (ok) {
        SocketStream stream(c->fd, limits.write_timeout_ms, stopping);
        try {
          res.stream(stream);
        } catch (...) {
          ok = false;  // the stream stops where it failed; the client sees it cut
        }
        ok = ok && stream.Finish();
      }
    } else if (res.body.size() <= (64u << 10)) {
      ok = WriteAll(c->fd, head + res.body, limits.write_timeout_ms);
    } else {
      ok = WriteAll(c->fd, head, limits.write_timeout_ms) && WriteAll(c->fd, res.body, limits.write_timeout_ms);
    }
    Observe(c, res, true);
    c->request_id.clear();
    PostBack(c, ok && keep ? Next::kKeepAlive : Next::kClose);
  }
};

HttpServer::HttpServer(Router router, ServerLimits limits, ErrorRenderer render_error)
    : impl_(std::make_unique<Impl>(std::move(router), limits, std::move(render_error))) {}

HttpServer::~HttpServer() = default;

void HttpServer::SetObserver(RequestObserver observer) { impl_->observer = std::move(observer); }

Status HttpServer::Bind(const std::string& host, int port) {
  // Every connection is a descriptor: take what the hard limit allows, and
  // keep the connection cap below the soft one, with room for the database,
  // the store and the workers' pipes.
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    const rlim_t want = std::min<rlim_t>(lim.rlim_max, 65536);
    if (lim.rlim_cur < want) {
      lim.rlim_cur = want;
      ::setrlimit(RLIMIT_NOFILE, &lim);
      ::getrlimit(RLIMIT_NOFILE, &lim);
    }
    if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur > 256) {
      impl_->limits.max_connections =
          std::min<int64_t>(impl_->limits.max_connections, static_cast<int64_t>(lim.rlim_cur) - 128);
    }
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string where = host + ":" + std::to_string(port);
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
    return Status(Code::kUnavailable, "cannot listen on " + where + " (unknown address)", "listen");
  }
  int fd = -1;
  for (addrinfo* a = found; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR (not SO_REUSEPORT: a second `burst serve` on the same
    // port must fail instead of silently taking half the requests).
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) break;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    return Status(Code::kUnavailable, "cannot listen on " + where + " (address in use or not available)", "listen");
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  impl_->bound_port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                                     : reinterpret_cast<sockaddr_in&>(ss).sin_port);
  impl_->listen_fd = fd;
  impl_->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  impl_->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl_->epoll_fd < 0 || impl_->wake_fd < 0) {
    return Status(Code::kUnavailable, std::string("cannot set up the event loop: ") + std::strerror(errno), "listen");
  }
  for (int watched : {impl_->listen_fd, impl_->wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = watched;
    ::epoll_ctl(impl_->epoll_fd, EPOLL_CTL_ADD, watched, &ev);
  }
  return Status();
}

int HttpServer::port() const { return impl_->bound_port; }

void HttpServer::Serve() {
  Impl& s = *impl_;
  if (s.listen_fd < 0) return;
  epoll_event events[256];
  int64_t last_sweep = NowMs();
  while (!s.stopping) {
    const int n = ::epoll_wait(s.epoll_fd, events, 256, 200);
    for (int i = 0; i < n && !s.stopping; ++i) {
      const int fd = events[i].data.fd;
      if (fd == s.listen_fd) {
        s.Accept();
      } else if (fd == s.wake_fd) {
        s.TakeBack();
      } else if (auto it = s.conns.find(fd); it != s.conns.end() && it->second->state != Impl::State::kBusy) {
        s.OnReadable(it->second.get());
      }
    }
    if (NowMs() - last_sweep >= 200) {
      s.Sweep();
      last_sweep = NowMs();
    }
  }
  // Stop: no new connections; running handlers finish and hand their
  // connections back, then everything closes.
  ::close(s.listen_fd);
  s.listen_fd = -1;
  s.pool.Shutdown();
  s.TakeBack();
  std::vector<Impl::Conn*> left;
  for (auto& [fd, c] : s.conns) left.push_back(c.get());
  for (Impl::Conn* c : left) s.Close(c);
}

void HttpServer::Stop() {
  impl_->stopping = true;
  if (impl_->wake_fd >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(impl_->wake_fd, &one, sizeof one);
  }
}

ServerStats HttpServer::stats() const {
  const Impl& s = *impl_;
  return ServerStats{s.n_open, s.n_accepted, s.n_refused, s.n_timed_out, s.n_rejected, s.n_handled,
                     s.pool.threads_started()};
}

}  // namespace burst::http
