// Request and Response: one HTTP/1.1 exchange as Burst's handlers see it.
//
// A Request arrives whole (its body read and checked against its route's
// limit) after the route's admission check passed; header names are
// lower-cased, the path and query are percent-decoded. A route that spools
// gets its body in a file instead of in memory (`body_file`). A Response is
// a buffered body, a stream (chunked transfer encoding) that the handler's
// thread writes after the handler returns, or a park: the request waits,
// holding no thread, until its Waker is woken or its time is up, and then
// its resume function answers it on a pool thread.
//
// Thread-safety: values; one request is handled by one thread at a time.
// A Waker (core/waker.h) may be used from any thread.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/waker.h"

namespace burst::http {

using Fields = std::vector<std::pair<std::string, std::string>>;

// A request body the server wrote to a temporary file (routes that spool:
// uploads), deleted when the last reference goes.
class BodyFile {
 public:
  // An empty temporary file in `dir` (unlinked at once: nothing is left
  // behind if the server dies); nullptr when it cannot be made.
  static std::shared_ptr<BodyFile> Create(const std::string& dir);
  ~BodyFile();
  BodyFile(const BodyFile&) = delete;
  BodyFile& operator=(const BodyFile&) = delete;
  // Appends; false when the disk refused (full, quota).
  bool Append(std::string_view data);
  int64_t size() const { return size_; }
  // The whole body, mapped read-only (the file's pages, not a copy); empty
  // when the file is empty or cannot be mapped. Valid while this lives.
  std::string_view View();

 private:
  BodyFile() = default;
  int fd_ = -1;
  int64_t size_ = 0;
  void* map_ = nullptr;
  size_t mapped_ = 0;
};

struct Request {
  std::string method;                // "GET", "POST", ...
  std::string target;                // as sent: path and query, still encoded
  std::string path;                  // decoded, without the query
  int minor_version = 1;             // HTTP/1.<minor>
  Fields headers;                    // names lower-cased, values trimmed
  Fields params;                     // the decoded query, in order
  std::vector<std::string> matches;  // [0] the path, then each {} of the route's pattern
  std::string body;
  std::shared_ptr<BodyFile> body_file;  // set instead of `body` on routes that spool
  std::string remote_address;           // the client's IP address
  // Framing, from the head: Content-Length (-1: none) or chunked.
  int64_t content_length = -1;
  bool chunked = false;
  bool expect_continue = false;
  bool keep_alive = true;
  // Who the route's admission check found the caller to be (an API key, a
  // worker id); the handler reads it with std::any_cast.
  std::any principal;

  // The first value of header `name` (lower-case), or "".
  std::string header(std::string_view name) const;
  size_t header_count(std::string_view name) const;
  bool has_param(std::string_view name) const;
  // The first value of query parameter `name`, or "".
  std::string param(std::string_view name) const;
};

// Streams a response body as it is produced.
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // False once the client is gone (or too slow to take the bytes); the
  // stream should stop then.
  virtual bool Write(std::string_view data) = 0;
  // True when the client has closed its side of the connection, checked
  // without blocking: a stream waiting for its next piece asks this.
  virtual bool ClientGone() = 0;
};

struct Response;

// A request that waits without a thread: once `waker` is woken or wait_ms
// have passed, `resume` runs on a pool thread with the request (its body
// already released) and fills the response; it may park again.
struct Park {
  std::shared_ptr<Waker> waker;
  int64_t wait_ms = 0;
  std::function<void(const Request&, Response&, bool timed_out)> resume;
};

struct Response {
  int status = 200;
  Fields headers;  // besides Content-Type, Content-Length, Connection
  std::string content_type = "application/json";
  std::string body;
  // When set, the body is this stream (Transfer-Encoding: chunked): run on
  // the handler's thread after the handler returns.
  std::function<void(StreamWriter&)> stream;
  bool close = false;  // close the connection after this response
  // When set, nothing is sent yet: the request is parked (see Park).
  std::shared_ptr<Park> park;

  void set_header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
  void set_content(std::string text, std::string type) {
    body = std::move(text);
    content_type = std::move(type);
  }
};

// The reason phrase of a status code ("Not Found").
const char* StatusText(int status);

// The bytes of a response's status line and headers, ending with the blank
// line. Without a stream: Content-Length; with one: chunked.
std::string SerializeHead(const Response& res, bool close);

}  // namespace burst::http
