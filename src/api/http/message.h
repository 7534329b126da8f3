// Request and Response: one HTTP/1.1 exchange as Burst's handlers see it.
//
// A Request arrives whole (its body read and checked against its route's
// limit) after the route's admission check passed; header names are
// lower-cased, the path and query are percent-decoded. A Response is either
// a buffered body or a stream (chunked transfer encoding) that the handler's
// thread writes after the handler returns.
//
// Thread-safety: values; one request is handled by one thread.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace burst::http {

using Fields = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;   // "GET", "POST", ...
  std::string target;   // as sent: path and query, still encoded
  std::string path;     // decoded, without the query
  int minor_version = 1;  // HTTP/1.<minor>
  Fields headers;       // names lower-cased, values trimmed
  Fields params;        // the decoded query, in order
  std::vector<std::string> matches;  // [0] the path, then each {} of the route's pattern
  std::string body;
  std::string remote_address;  // the client's IP address
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

struct Response {
  int status = 200;
  Fields headers;  // besides Content-Type, Content-Length, Connection
  std::string content_type = "application/json";
  std::string body;
  // When set, the body is this stream (Transfer-Encoding: chunked): run on
  // the handler's thread after the handler returns.
  std::function<void(StreamWriter&)> stream;
  bool close = false;  // close the connection after this response

  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
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
