// HTTP helpers for end-to-end tests against a real `burst serve`: a server
// process in a temp folder (its port and admin key read the way a user
// would: from its first output line and DATA/admin.key), requests with an
// API key, file uploads, and a raw connection (Raw). Tests that include this link cpp-httplib.
#pragma once

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include "e2e_util.h"

namespace burst::e2e {

struct Resp {
  int status = 0;  // 0: no HTTP answer
  Json body;       // null when the body is not JSON
  std::string raw;
  std::string Describe() const {
    return status ? "HTTP " + std::to_string(status) + " " + raw.substr(0, 3000) : "no HTTP answer";
  }
};

// An answer as a Resp (status 0 when there was none).
inline Resp RespOf(const httplib::Result& r) {
  Resp out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  out.body = Json::parse(r->body, nullptr, false);
  if (out.body.is_discarded()) out.body = Json();
  return out;
}

class ServeProcess {
 public:
  // Starts `burst serve --data DIR/data --listen 127.0.0.1:0 FLAGS...` and
  // waits until it listens; error() says why when it did not.
  // port: 0 = any free one.
  ServeProcess(const std::string& tmp_prefix, const std::vector<std::string>& flags, int port = 0)
      : dir_(tmp_prefix) {
    std::vector<std::string> args = {BurstBinary(), "serve",
                                     "--data",      (dir_ / "data").string(),
                                     "--listen",    "127.0.0.1:" + std::to_string(port)};
    args.insert(args.end(), flags.begin(), flags.end());
    proc_ = std::make_unique<Process>(args);
    std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    std::smatch m;
    std::string out;
    WaitUntil(
        [&] {
          out = proc_->StdoutSoFar();
          return std::regex_search(out, m, listening) || !proc_->Running();
        },
        30, 20);
    if (!std::regex_search(out, m, listening)) {
      error_ = "burst serve did not start:\n" + proc_->Wait(1).Describe();
      return;
    }
    port_ = std::stoi(m[1]);
    key_ = Slurp(dir_ / "data" / "admin.key");
    while (!key_.empty() && key_.back() == '\n') key_.pop_back();
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;
  // SIGTERM (workers preempted), reaped.
  ~ServeProcess() {
    if (proc_ && proc_->Running()) {
      proc_->Signal(SIGTERM);
      proc_->Wait(60);
    }
  }

  // Sends `sig` and waits up to wait_s for the process to end.
  ProcResult Kill(int sig, double wait_s) {
    proc_->Signal(sig);
    return proc_->Wait(wait_s);
  }
  bool Running() const { return proc_ && proc_->Running(); }
  // The API key Send uses (a standby has none of its own: it never created one).
  void set_key(const std::string& key) { key_ = key; }

  const std::string& error() const { return error_; }
  int port() const { return port_; }
  const std::string& key() const { return key_; }
  const TempDir& dir() const { return dir_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string Output() const { return proc_->StdoutSoFar() + proc_->StderrSoFar(); }

  // GET, DELETE, or POST with a JSON body; `key` "" = the admin key.
  Resp Send(const std::string& method, const std::string& path, const Json& body = Json(),
            httplib::Headers headers = {}, const std::string& key = "") const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(120, 0);
    headers.emplace("Authorization", "Bearer " + (key.empty() ? key_ : key));
    httplib::Result r = method == "GET"      ? c.Get(path, headers)
                        : method == "DELETE" ? c.Delete(path, headers)
                                             : c.Post(path, headers, body.dump(), "application/json");
    return RespOf(r);
  }

  // POST /v1/files; the file id, or "" when the upload failed.
  std::string Upload(const fs::path& file) const {
    httplib::Client c("127.0.0.1", port_);
    httplib::MultipartFormDataItems items = {
        {"purpose", "fine-tune", "", ""},
        {"file", Slurp(file), file.filename().string(), "application/jsonl"}};
    auto r = c.Post("/v1/files", {{"Authorization", "Bearer " + key_}}, items);
    if (!r || r->status != 200) return "";
    return Json::parse(r->body)["id"].get<std::string>();
  }

  // `burst ARGS --url ... --api-key ...`.
  ProcResult Burst(std::vector<std::string> args, double timeout_s = 180) const {
    args.insert(args.end(), {"--url", url(), "--api-key", key_});
    return RunBurst(args, timeout_s);
  }

 private:
  TempDir dir_;
  std::unique_ptr<Process> proc_;
  std::string error_, key_;
  int port_ = 0;
};

// A raw connection, for what httplib's client will not send.
class Raw {
 public:
  explicit Raw(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  }
  ~Raw() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool ok() const { return ok_; }
  bool Send(const std::string& s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Reads until `until` appears, the peer closes, or timeout_ms passes.
  std::string ReadUntil(const std::string& until, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (buf_.find(until) == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char b[4096];
      const ssize_t n = ::recv(fd_, b, sizeof b, 0);
      if (n <= 0) break;
      buf_.append(b, static_cast<size_t>(n));
    }
    return buf_;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  std::string buf_;
};

}  // namespace burst::e2e
