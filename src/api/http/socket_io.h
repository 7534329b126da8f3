// Socket helpers of the HTTP server: writing a response to a non-blocking
// socket under a deadline, telling whether the peer has gone, a chunked
// response stream, and a peer's address as text.
//
// Thread-safety: functions of their arguments; one SocketStream per thread.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/http/message.h"

namespace burst::http {

int64_t NowMs();

// Sends all of `data` on a non-blocking socket; false when the client is
// gone or takes nothing for `timeout_ms` (a large download on a slow link
// is fine as long as it moves).
bool WriteAll(int fd, std::string_view data, int64_t timeout_ms);

// True when the peer has closed its side (or the socket failed), without
// blocking and without consuming anything it sent.
bool PeerClosed(int fd);

std::string AddressOf(const sockaddr_storage& ss);

// A response body in chunked transfer encoding. A server that is stopping
// counts as a client gone, so a stream never holds up the shutdown.
class SocketStream : public StreamWriter {
 public:
  SocketStream(int fd, int64_t timeout_ms, const std::atomic<bool>& stopping)
      : fd_(fd), timeout_ms_(timeout_ms), stopping_(stopping) {}
  bool Write(std::string_view data) override;
  bool ClientGone() override;
  bool Finish();

 private:
  int fd_;
  int64_t timeout_ms_;
  const std::atomic<bool>& stopping_;
  bool failed_ = false;
};

}  // namespace burst::http
