// The HTTP/1.1 request head and chunked body, parsed from untrusted bytes.
//
// ParseRequestHead reads the request line and headers incrementally (call
// it again with more bytes while it says kIncomplete) under hard limits, and
// decides the body's framing: Content-Length (all copies equal), or
// Transfer-Encoding: chunked, never both. It refuses what a proxy and Burst
// could read differently (request smuggling): two different lengths, a
// length with chunked, folded header lines, control bytes in values.
// ChunkedDecoder turns a chunked body into bytes while counting them
// against the route's limit.
//
// Thread-safety: pure functions and a value type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/http/message.h"

namespace burst::http {

struct HeadLimits {
  size_t max_head_bytes = 16 << 10;  // request line + headers + blank line
  size_t max_headers = 100;
  size_t max_params = 100;
};

// Why a request was refused before its handler: the status to answer and a
// message naming what was wrong.
struct ParseError {
  int status = 400;
  std::string message;
};

enum class HeadResult { kIncomplete, kDone, kError };

// Parses the head at the start of `buf`. kDone: *req has method, target,
// path, params, headers and framing; *consumed is the head's length (the
// body starts there). kError: *err says why (400, 431, 501, 505).
// `s` with A-Z lower-cased (header names and the tokens HTTP compares
// case-insensitively); other bytes as they are.
std::string LowerAscii(std::string_view s);

HeadResult ParseRequestHead(std::string_view buf, const HeadLimits& limits, Request* req, size_t* consumed,
                            ParseError* err);

// Percent-decodes `in` (with '+' as a space in query strings); false on a
// malformed escape or a NUL byte.
bool DecodePercent(std::string_view in, bool plus_is_space, std::string* out);
// Splits and decodes "a=1&b=2"; false when malformed or over `max` pairs.
bool ParseQuery(std::string_view query, size_t max, Fields* out);

class ChunkedDecoder {
 public:
  explicit ChunkedDecoder(int64_t max_body) : max_body_(max_body) {}
  // Consumes the body's bytes from the front of `in`, appending decoded data
  // to *body; returns how many bytes of `in` it took. Stops at the end of
  // the body (done()) or at an error (failed(): 400 malformed, 413 over the
  // limit).
  size_t Feed(std::string_view in, std::string* body);
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kFailed; }
  const ParseError& error() const { return error_; }

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone, kFailed };
  size_t Fail(int status, std::string message, size_t consumed);
  int64_t max_body_;
  int64_t total_ = 0;
  int64_t remaining_ = 0;  // of the current chunk
  std::string line_;       // a size or trailer line in progress
  size_t trailer_bytes_ = 0;
  State state_ = State::kSize;
  ParseError error_;
};

}  // namespace burst::http
