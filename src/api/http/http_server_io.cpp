// The HTTP server's I/O thread (http_server_impl.h): accepting, reading
// heads and bodies without blocking, deadlines, and parked requests.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "api/http/http_server_impl.h"
#include "api/http/socket_io.h"

namespace burst::http {
namespace {

std::string MiB(int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

HttpServer::Impl::Impl(Router r, ServerLimits l, ErrorRenderer e)
    : router(std::move(r)),
      limits(std::move(l)),
      render_error(std::move(e)),
      api_pool(limits.max_threads, limits.max_threads_per_tenant),
      internal_pool(limits.max_internal_threads, 0) {
  sink->impl = this;
}

HttpServer::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(sink->mu);
    sink->impl = nullptr;
  }
  for (int fd : {listen_fd, epoll_fd, wake_fd})
    if (fd >= 0) ::close(fd);
}

void HttpServer::Impl::Watch(Conn* c, bool parked) {
  epoll_event ev{};
  ev.events = parked ? EPOLLRDHUP : EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c->fd;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev);
}

void HttpServer::Impl::Unwatch(Conn* c) { ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr); }

void HttpServer::Impl::SetState(Conn* c, State s) {
  if (Idle(c->state)) --addresses[c->address].idle;
  if (Idle(s)) ++addresses[c->address].idle;
  c->state = s;
}

void HttpServer::Impl::ReleaseBody(Conn* c) {
  auto give_back = [&](std::unordered_map<std::string, int64_t>& by, int64_t& held) {
    if (held == 0) return;
    auto it = by.find(c->tenant);
    if (it != by.end() && (it->second -= held) <= 0) by.erase(it);
    held = 0;
  };
  give_back(mem_by_tenant, c->mem_held);
  give_back(spool_by_tenant, c->spool_held);
}

void HttpServer::Impl::Unpark(Conn* c) {
  parked.erase(c->serial);
  auto it = parked_by_tenant.find(c->tenant);
  if (it != parked_by_tenant.end() && --it->second <= 0) parked_by_tenant.erase(it);
  --n_parked;
  if (c->park && c->park->waker) c->park->waker->Detach();
}

void HttpServer::Impl::Close(Conn* c) {
  if (c->state == State::kParked) Unpark(c);
  SetState(c, State::kLinger);  // out of the idle count
  ReleaseBody(c);
  Unwatch(c);
  ::close(c->fd);
  Address& a = addresses[c->address];
  if (--a.open <= 0) addresses.erase(c->address);
  --n_open;
  conns.erase(c->fd);
}

HttpServer::Impl::Conn* HttpServer::Impl::OldestIdle(const std::string& address, int64_t now) {
  // Only connections idle past the grace: a client opening several at once
  // sends on each within moments.
  auto eligible = [&](const Conn& c) { return Idle(c.state) && now - c.since_ms >= limits.idle_grace_ms; };
  std::string from = address;
  if (from.empty()) {
    std::unordered_map<std::string, int> count;
    int most = 0;
    for (const auto& [fd, c] : conns) {
      if (!eligible(*c)) continue;
      const int n = ++count[c->address];
      if (n > most) most = n, from = c->address;
    }
    if (most == 0) return nullptr;
  }
  Conn* oldest = nullptr;
  for (auto& [fd, c] : conns) {
    if (c->address == from && eligible(*c) && (!oldest || c->since_ms < oldest->since_ms)) oldest = c.get();
  }
  return oldest;
}

void HttpServer::Impl::Accept() {
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
    // Full: a connection sitting idle makes room, from the address that
    // holds the most (silent connections cannot keep others out).
    if (static_cast<int>(conns.size()) >= limits.max_connections) {
      if (Conn* idle = OldestIdle("", NowMs())) Close(idle);
    }
    Address& at = addresses[address];
    if (static_cast<int>(conns.size()) >= limits.max_connections ||
        at.open >= limits.max_connections_per_address) {
      // Refused: answered (best effort, it is small) and closed at once.
      if (at.open == 0) addresses.erase(address);
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
    c->serial = ++next_serial;
    c->address = std::move(address);
    c->since_ms = NowMs();  // its first head's deadline runs from now
    ++at.open;
    ++at.idle;
    ++n_open;
    ++n_accepted;
    Watch(c.get());
    conns[fd] = std::move(c);
  }
}

void HttpServer::Impl::Observe(Conn* c, const Response& res, bool admitted) {
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

void HttpServer::Impl::Begin(Conn* c) {
  c->head_at = std::chrono::steady_clock::now();
  c->request_id = id_prefix + std::to_string(next_request.fetch_add(1) + 1);
}

void HttpServer::Impl::Reject(Conn* c, int status, const std::string& message, const std::string& allow) {
  if (c->request_id.empty()) Begin(c);
  Response res;
  render_error(res, status, message);
  res.set_header("X-Request-Id", c->request_id);
  if (!allow.empty()) res.set_header("Allow", allow);
  const std::string bytes = SerializeHead(res, true) + res.body;
  [[maybe_unused]] ssize_t sent = ::send(c->fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(c->fd, SHUT_WR);
  ReleaseBody(c);
  c->req.body = std::string();
  c->req.body_file.reset();
  SetState(c, State::kLinger);
  c->since_ms = NowMs();
  c->in.clear();
  ++n_rejected;
  Observe(c, res, false);
  c->request_id.clear();
}

void HttpServer::Impl::Dispatch(Conn* c) {
  Unwatch(c);
  SetState(c, State::kBusy);
  if (!c->admitted) {
    PoolOf(c).Submit("address " + c->address, [this, c] { RunAdmit(c); });
  } else {
    PoolOf(c).Submit(c->tenant, [this, c] { RunHandler(c); });
  }
}

bool HttpServer::Impl::HoldBody(Conn* c, int64_t more) {
  return c->route->options.spool
             ? Hold(c, spool_by_tenant, c->spool_held, more, limits.max_spool_per_tenant, "uploads")
             : Hold(c, mem_by_tenant, c->mem_held, more, limits.max_body_memory_per_tenant, "request bodies");
}

void HttpServer::Impl::StartBody(Conn* c) {
  SetState(c, State::kBody);
  c->body_start_ms = NowMs();
  c->body_received = 0;
  // A declared length is held whole at once; a chunked body as it comes.
  if (c->req.content_length > 0 && !HoldBody(c, c->req.content_length)) return;
  if (c->route->options.spool) {
    c->req.body_file = BodyFile::Create(limits.spool_dir);
    if (!c->req.body_file) return Reject(c, 503, "cannot store the upload for checking now; retry later");
  } else if (c->req.content_length > 0) {
    c->req.body.reserve(static_cast<size_t>(c->req.content_length));
  }
  ConsumeBody(c);
}

bool HttpServer::Impl::Keep(Conn* c, std::string_view data) {
  c->body_received += static_cast<int64_t>(data.size());
  if (!c->req.body_file) {
    c->req.body.append(data);
    return true;
  }
  if (c->req.body_file->Append(data)) return true;
  Reject(c, 503, "cannot store the upload for checking now (the server's disk refused it); retry later");
  return false;
}

void HttpServer::Impl::ConsumeBody(Conn* c) {
  if (c->chunked) {
    std::string decoded;
    const size_t used = c->chunked->Feed(c->in, &decoded);
    c->in.erase(0, used);
    if (!HoldBody(c, static_cast<int64_t>(decoded.size())) || !Keep(c, decoded)) return;
    if (c->chunked->failed()) return Reject(c, c->chunked->error().status, c->chunked->error().message);
    if (c->chunked->done()) Dispatch(c);
    return;
  }
  const size_t take =
      static_cast<size_t>(std::min<int64_t>(c->body_left, static_cast<int64_t>(c->in.size())));
  if (!Keep(c, std::string_view(c->in).substr(0, take))) return;
  c->in.erase(0, take);
  c->body_left -= static_cast<int64_t>(take);
  if (c->body_left == 0) Dispatch(c);
}

void HttpServer::Impl::AfterHead(Conn* c) {
  Request& req = c->req;
  req.remote_address = c->address;
  c->route = nullptr;
  c->fresh = false;
  Begin(c);
  const Router::Match m = router.Find(req.method, req.path, &req.matches);
  if (!m.route) {
    if (m.status == 405) return Reject(c, 405, req.method + " is not allowed on " + req.path, m.allow);
    return Reject(c, 404, "no route " + req.method + " " + req.path);
  }
  c->route = m.route;
  c->tenant = "address " + c->address;
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
    [[maybe_unused]] ssize_t sent =
        ::send(c->fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  StartBody(c);
}

void HttpServer::Impl::ProcessInput(Conn* c) {
  if (c->state == State::kBody) return ConsumeBody(c);
  if (c->state != State::kIdle && c->state != State::kHead) return;
  if (c->in.empty()) return;
  if (c->state == State::kIdle) {
    SetState(c, State::kHead);
    if (!c->fresh) c->since_ms = NowMs();
  }
  // Parse only once the blank line that ends the head has arrived, so a
  // client sending a byte at a time costs a search of its new bytes only.
  const size_t from = c->scanned > 3 ? c->scanned - 3 : 0;
  const bool complete =
      c->in.find("\n\n", from) != std::string::npos || c->in.find("\n\r\n", from) != std::string::npos;
  c->scanned = c->in.size();
  if (!complete) {
    if (c->in.size() > limits.head.max_head_bytes) {
      Reject(
          c, 431,
          "the request head is over the limit of " + std::to_string(limits.head.max_head_bytes) + " bytes");
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

void HttpServer::Impl::OnReadable(Conn* c) {
  if (c->state == State::kParked) return Close(c);  // watched for hang-ups only: the client left
  char buf[64 << 10];
  // At most 256 KiB a turn: a connection streaming a large body waits for
  // the next round of the loop, behind the others' small requests.
  for (int i = 0; i < 4 && c->state != State::kBusy && c->state != State::kParked; ++i) {
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

void HttpServer::Impl::Sweep() {
  const int64_t now = NowMs();
  std::vector<Conn*> expired_idle, slow_head, slow_body, done_lingering, done_waiting;
  for (auto& [fd, c] : conns) {
    switch (c->state) {
      case State::kIdle:
        if (now - c->since_ms > (c->fresh ? limits.head_timeout_ms : limits.idle_timeout_ms)) {
          expired_idle.push_back(c.get());
        }
        break;
      case State::kHead:
        if (now - c->since_ms > limits.head_timeout_ms) slow_head.push_back(c.get());
        break;
      case State::kBody: {
        const int64_t late = now - c->body_start_ms - limits.body_grace_ms;
        if (late > 0 && c->body_received < limits.min_body_bytes_per_s * late / 1000)
          slow_body.push_back(c.get());
        break;
      }
      case State::kParked:
        if (now >= c->park_until_ms) done_waiting.push_back(c.get());
        break;
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
  for (Conn* c : expired_idle) {
    if (c->fresh) ++n_timed_out;  // opened and never sent a request
    Close(c);
  }
  for (Conn* c : done_lingering) Close(c);
  for (Conn* c : done_waiting) Resume(c, /*timed_out=*/true);
  for (Conn* c : slow_head) {
    ++n_timed_out;
    Reject(c, 408,
           "the request head did not arrive within " + std::to_string(limits.head_timeout_ms) + " ms");
  }
  for (Conn* c : slow_body) {
    ++n_timed_out;
    Reject(
        c, 408,
        "the request body arrived slower than " + std::to_string(limits.min_body_bytes_per_s) + " bytes/s");
  }
  // Addresses past their share of idle connections lose their oldest.
  std::vector<std::string> crowded;
  for (const auto& [address, a] : addresses) {
    if (a.idle > limits.max_idle_per_address) crowded.push_back(address);
  }
  for (const std::string& address : crowded) {
    while (addresses.count(address) && addresses[address].idle > limits.max_idle_per_address) {
      Conn* oldest = OldestIdle(address, now);
      if (!oldest) break;
      Close(oldest);
    }
  }
}

void HttpServer::Impl::Resume(Conn* c, bool timed_out) {
  Unpark(c);
  Unwatch(c);
  SetState(c, State::kBusy);
  PoolOf(c).Submit(c->tenant, [this, c, timed_out] { RunResume(c, timed_out); });
}

void HttpServer::Impl::Wait(Conn* c) {
  // Its body is read and used: it goes now, not when the wait ends.
  ReleaseBody(c);
  c->req.body = std::string();
  c->req.body_file.reset();
  int64_t& n = parked_by_tenant[c->tenant];
  if (n >= limits.max_parked_per_tenant) {
    c->park->waker->Detach();
    c->park.reset();
    Watch(c);
    return Reject(c, 429,
                  "your requests already have " + std::to_string(n) +
                      " long polls waiting, the limit; wait for one to be answered");
  }
  ++n;
  ++n_parked;
  parked[c->serial] = c;
  SetState(c, State::kParked);
  c->since_ms = NowMs();
  c->park_until_ms = c->since_ms + std::max<int64_t>(0, c->park->wait_ms);
  Watch(c, /*parked=*/true);
  std::weak_ptr<WakeSink> weak = sink;
  const uint64_t serial = c->serial;
  // Runs at once (here) when the waker was woken before it was attached.
  c->park->waker->Attach([weak, serial] {
    if (auto s = weak.lock()) {
      std::lock_guard<std::mutex> lock(s->mu);
      if (s->impl) s->impl->PostWake(serial);
    }
  });
}

void HttpServer::Impl::TakeBack() {
  uint64_t n;
  [[maybe_unused]] ssize_t r = ::read(wake_fd, &n, sizeof n);
  std::vector<std::pair<Conn*, Next>> items;
  std::vector<uint64_t> woken;
  {
    std::lock_guard<std::mutex> lock(back_mu);
    items.swap(back);
    woken.swap(wakes);
  }
  for (auto [c, next] : items) {
    if (next != Next::kReadBody && next != Next::kPark) ReleaseBody(c);
    if (stopping || next == Next::kClose) {
      Close(c);
      continue;
    }
    if (next == Next::kPark) {
      Wait(c);
    } else if (next == Next::kLinger) {
      Watch(c);
      SetState(c, State::kLinger);
      c->since_ms = NowMs();
      c->in.clear();
    } else if (next == Next::kReadBody) {
      Watch(c);
      StartBody(c);
    } else {  // kKeepAlive: the next request, maybe already here (pipelined)
      Watch(c);
      c->req = Request();
      c->route = nullptr;
      c->chunked.reset();
      c->admitted = false;
      c->park.reset();
      c->scanned = 0;
      SetState(c, State::kIdle);
      c->since_ms = NowMs();
      ProcessInput(c);
    }
  }
  for (uint64_t serial : woken) {
    auto it = parked.find(serial);
    if (it != parked.end() && it->second->state == State::kParked) Resume(it->second, /*timed_out=*/false);
  }
}

bool HttpServer::Impl::Hold(Conn* c, std::unordered_map<std::string, int64_t>& by, int64_t& held,
                            int64_t more, int64_t limit, const char* what) {
  if (more <= 0) return true;
  int64_t& total = by[c->tenant];
  if (total + more > limit) {
    if (total == 0) by.erase(c->tenant);
    Reject(c, 429,
           "your requests already have " + MiB(total) + " of " + what +
               " in flight, this one would take them " + "past the limit of " + MiB(limit) +
               "; retry when some have finished");
    return false;
  }
  total += more;
  held += more;
  return true;
}

}  // namespace burst::http
