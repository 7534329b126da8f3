// libburst_nodelay_preload.so: an LD_PRELOAD shim for what-if measurements
// (docs/bench.md, "Serverless runtime"). It sets TCP_NODELAY on every TCP
// socket the process connects or accepts, i.e. it switches Nagle's algorithm
// off for `burst serve`, its workers (they inherit LD_PRELOAD) and any
// client, without editing src/. bench/runtime_e2e.py --preload uses it to
// show what the control plane would gain from setting TCP_NODELAY itself
// (httplib's set_tcp_nodelay(true) on the server and on every client).
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace {

void NoDelay(int fd) {
  if (fd < 0) return;
  int type = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return;
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &sl) != 0) return;
  if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) return;
  int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
}

template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

int connect(int fd, const sockaddr* addr, socklen_t len) {
  static auto real = Next<int (*)(int, const sockaddr*, socklen_t)>("connect");
  if (addr && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6)) {
    int type = 0;
    socklen_t tl = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM) {
      int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    }
  }
  return real(fd, addr, len);
}

int accept(int fd, sockaddr* addr, socklen_t* len) {
  static auto real = Next<int (*)(int, sockaddr*, socklen_t*)>("accept");
  int c = real(fd, addr, len);
  NoDelay(c);
  return c;
}

int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  static auto real = Next<int (*)(int, sockaddr*, socklen_t*, int)>("accept4");
  int c = real(fd, addr, len, flags);
  NoDelay(c);
  return c;
}

}  // extern "C"
