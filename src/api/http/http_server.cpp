// The HTTP server's pool threads (http_server_impl.h): admission,
// handlers and responses; and Bind, Serve, Stop.
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "api/http/http_server_impl.h"
#include "api/http/socket_io.h"

namespace burst::http {

FairPool& HttpServer::Impl::PoolOf(const Conn* c) {
  return c->route && c->route->options.lane == Lane::kInternal ? internal_pool : api_pool;
}

std::string HttpServer::Impl::ErrorBytes(int status, const std::string& message) {
  Response res;
  render_error(res, status, message);
  return SerializeHead(res, /*close=*/true) + res.body;
}

void HttpServer::Impl::PostBack(Conn* c, Next next) {
  {
    std::lock_guard<std::mutex> lock(back_mu);
    back.emplace_back(c, next);
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t w = ::write(wake_fd, &one, sizeof one);
}

void HttpServer::Impl::PostWake(uint64_t serial) {
  {
    std::lock_guard<std::mutex> lock(back_mu);
    wakes.push_back(serial);
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t w = ::write(wake_fd, &one, sizeof one);
}

void HttpServer::Impl::Refuse(Conn* c, Response& res, bool admitted) {
  ++n_rejected;
  res.set_header("X-Request-Id", c->request_id);
  const std::string bytes = SerializeHead(res, true) + res.body;
  if (WriteAll(c->fd, bytes, limits.write_timeout_ms)) ::shutdown(c->fd, SHUT_WR);
  Observe(c, res, admitted);
  PostBack(c, Next::kLinger);
}

void HttpServer::Impl::RunAdmit(Conn* c) {
  Request& req = c->req;
  Response res;
  bool ok = false;
  try {
    ok = c->route->admit(req, res);
  } catch (...) {
    res = Response();
    render_error(res, 500, "internal error while checking the request");
  }
  if (!ok) return Refuse(c, res, false);
  c->admitted = true;
  if (c->route->options.tenant) {
    try {
      c->tenant = c->route->options.tenant(req);
    } catch (...) {  // deliberately ignored: the address stays the tenant
    }
    if (c->tenant.empty()) c->tenant = "address " + c->address;
  }
  if (TooLarge(req, *c->route)) {
    res = Response();
    render_error(res, 413, TooLargeMessage(req, *c->route));
    return Refuse(c, res, true);
  }
  if (req.chunked || req.content_length > 0) {
    if (req.expect_continue && !WriteAll(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", limits.write_timeout_ms)) {
      return PostBack(c, Next::kClose);
    }
    return PostBack(c, Next::kReadBody);
  }
  // Its handler runs as its tenant: here at once when the tenant has room,
  // else behind the tenant's queue.
  if (PoolOf(c).Switch(c->tenant)) return RunHandler(c);
  PoolOf(c).Submit(c->tenant, [this, c] { RunHandler(c); });
}

void HttpServer::Impl::RunHandler(Conn* c) {
  ++n_handled;
  Response res;
  try {
    c->route->handler(c->req, res);
  } catch (...) {
    res = Response();
    render_error(res, 500, "internal error");
  }
  if (c->req.body.size() >= (1u << 20) && !res.stream) {
    // A large body and what its handler parsed from it are gone now: hand
    // the freed pages back, so a burst of big requests does not stay
    // resident (the allocator keeps freed memory otherwise).
    c->req.body = std::string();
    ::malloc_trim(0);
  }
  Respond(c, res);
}

void HttpServer::Impl::RunResume(Conn* c, bool timed_out) {
  Response res;
  std::shared_ptr<http::Park> park = std::move(c->park);
  try {
    park->resume(c->req, res, timed_out);
  } catch (...) {
    res = Response();
    render_error(res, 500, "internal error");
  }
  Respond(c, res);
}

void HttpServer::Impl::Respond(Conn* c, Response& res) {
  if (res.park) {
    if (res.park->waker && res.park->resume && !stopping) {
      c->park = std::move(res.park);
      return PostBack(c, Next::kPark);
    }
    // Parked with no way to go on, or stopping: an answer beats a hang.
    res = Response();
    render_error(res, 503, "the server is shutting down; retry");
    res.close = true;
  }
  const bool keep = c->req.keep_alive && !res.close && !stopping;
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

HttpServer::HttpServer(Router router, const ServerLimits& limits, ErrorRenderer render_error)
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
    return Status(Code::kUnavailable, "cannot listen on " + where + " (address in use or not available)",
                  "listen");
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
    return Status(Code::kUnavailable, std::string("cannot set up the event loop: ") + std::strerror(errno),
                  "listen");
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
  // connections back, then everything closes (parked requests unanswered).
  ::close(s.listen_fd);
  s.listen_fd = -1;
  s.api_pool.Shutdown();
  s.internal_pool.Shutdown();
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
  return ServerStats{s.n_open,
                     s.n_accepted,
                     s.n_refused,
                     s.n_timed_out,
                     s.n_rejected,
                     s.n_handled,
                     s.api_pool.threads_started() + s.internal_pool.threads_started(),
                     s.n_parked};
}

}  // namespace burst::http
