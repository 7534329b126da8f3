// In-process API tests: a real ApiServer on a free port over an in-memory
// database, a mem:// store and a fake executor (no processes), and a raw
// socket client that can send what well-behaved clients never do.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <thread>

#include "api/server.h"
#include "core/fs.h"
#include "core/ids.h"

namespace burst {

// A server that answers before reading a whole body closes the connection
// while the client may still write: the write fails (EPIPE) instead of
// killing the test binary with SIGPIPE, as in any real client.
inline const bool kIgnoreSigpipe = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();

template <typename T>
T Must(Result<T> r) {
  if (!r.ok()) throw Error(r.status());
  return std::move(r).value();
}

// A raw TCP connection to the server, from `source` (any 127.x.y.z: the
// per-address cap sees them as different clients).
class RawConn {
 public:
  RawConn(int port, const std::string& source = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) ADD_FAILURE() << "bind " << source;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  }
  ~RawConn() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return connected_; }
  // False once the server has closed the connection.
  bool Send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // What the server sent within `timeout_ms` or until it closed; *closed
  // tells which.
  std::string Read(int timeout_ms, bool* closed = nullptr) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    if (closed) *closed = false;
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        if (closed) *closed = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // The status code of the first response in `bytes` (0 if none).
  static int StatusOf(const std::string& bytes) {
    if (bytes.rfind("HTTP/1.1 ", 0) != 0 || bytes.size() < 12) return 0;
    return std::atoi(bytes.substr(9, 3).c_str());
  }
  // The body of a response with Content-Length.
  static std::string BodyOf(const std::string& bytes) {
    const size_t at = bytes.find("\r\n\r\n");
    return at == std::string::npos ? "" : bytes.substr(at + 4);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    md_ = Must(Metadata::Open(":memory:"));
    store_ = Must(OpenObjectStore("mem://"));
    org_a_ = Must(md_->CreateOrg("a")).id;
    org_b_ = Must(md_->CreateOrg("b")).id;
    key_a_ = Must(md_->CreateApiKey(org_a_, "test")).secret;
    key_b_ = Must(md_->CreateApiKey(org_b_, "test")).secret;
    ro_.slots = 1;
    opt_.port = 0;
    opt_.model_roots = {std::filesystem::path(BURST_SOURCE_DIR) / "models"};
    opt_.http.head_timeout_ms = 1000;
    opt_.http.body_grace_ms = 500;
    opt_.http.linger_ms = 200;
  }

  void Start() {
    rt_ = std::make_unique<Runtime>(*md_, exec_, clock_, ro_);
    server_ = std::make_unique<ApiServer>(*md_, *store_, *rt_, opt_);
    ASSERT_TRUE(server_->Bind().ok());
    port_ = server_->port();
    thread_ = std::thread([this] { server_->Serve(); });
  }

  void TearDown() override {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
    rt_.reset();
  }

  httplib::Client Client(const std::string& key) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    if (!key.empty()) c.set_default_headers({{"Authorization", "Bearer " + key}});
    return c;
  }

  // A worker the runtime started for a queued job, and its token.
  std::pair<std::string, std::string> StartWorker() {
    JobRecord j;
    j.id = NewId("ftjob");
    j.org_id = org_a_;
    j.request_sha256 = j.id;
    j.spec = {{"model", "burst-small"}, {"training_file", "file-x"}, {"max_retries", 2}};
    j.total_steps = 3;
    bool created = false;
    EXPECT_TRUE(rt_->Submit(j, &created).ok());
    EXPECT_FALSE(exec_.started.empty());
    return {exec_.started.back().worker_id, exec_.started.back().token};
  }

  std::unique_ptr<Metadata> md_;
  std::unique_ptr<ObjectStore> store_;
  FakeClock clock_;
  FakeExecutor exec_{clock_};
  RuntimeOptions ro_;
  ServerOptions opt_;
  std::unique_ptr<Runtime> rt_;
  std::unique_ptr<ApiServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::string org_a_, org_b_, key_a_, key_b_;
};

}  // namespace burst
