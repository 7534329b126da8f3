#include "api/http/request_parser.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace burst::http {
namespace {

// RFC 9110 tchar: the characters of a method or header name.
bool IsTokenChar(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

HeadResult Fail(ParseError* err, int status, std::string message) {
  err->status = status;
  err->message = std::move(message);
  return HeadResult::kError;
}

// Content-Length's copies (and comma lists) must all be the same decimal
// number: two different lengths are how one request is read as two.
bool ParseContentLength(const Request& req, int64_t* out, std::string* why) {
  int64_t value = -1;
  for (const auto& [name, v] : req.headers) {
    if (name != "content-length") continue;
    std::string_view rest = v;
    while (true) {
      const size_t comma = rest.find(',');
      std::string_view item = TrimOws(rest.substr(0, comma));
      if (item.empty() || item.size() > 18 ||
          !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        *why = "Content-Length must be a decimal number of bytes";
        return false;
      }
      const int64_t n = std::stoll(std::string(item));
      if (value >= 0 && n != value) {
        *why = "two different Content-Length values (" + std::to_string(value) + " and " + std::to_string(n) +
               ")";
        return false;
      }
      value = n;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  *out = value;
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string LowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool DecodePercent(std::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = HexValue(in[i + 1]);
      const int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return false;
    out->push_back(c);
  }
  return true;
}

bool ParseQuery(std::string_view query, size_t max, Fields* out) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string key, value;
    if (!DecodePercent(pair.substr(0, eq), true, &key)) return false;
    if (eq != std::string_view::npos && !DecodePercent(pair.substr(eq + 1), true, &value)) return false;
    if (out->size() >= max) return false;
    out->emplace_back(std::move(key), std::move(value));
  }
  return true;
}

HeadResult ParseRequestHead(std::string_view buf, const HeadLimits& limits, Request* req, size_t* consumed,
                            ParseError* err) {
  // Empty lines before a request line are ignored (RFC 9112 2.2): some
  // clients send a CRLF after a body.
  size_t start = 0;
  while (start < buf.size() && start < 8 && (buf[start] == '\r' || buf[start] == '\n')) ++start;
  // Find the blank line that ends the head.
  size_t end = std::string_view::npos;
  std::vector<std::string_view> lines;
  for (size_t pos = start;;) {
    const size_t nl = buf.find('\n', pos);
    if (nl == std::string_view::npos || nl + 1 > limits.max_head_bytes) {
      if (buf.size() > limits.max_head_bytes) {
        return Fail(
            err, 431,
            "the request head is over the limit of " + std::to_string(limits.max_head_bytes) + " bytes");
      }
      return HeadResult::kIncomplete;
    }
    std::string_view line = buf.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = nl + 1;
    if (line.empty()) {
      if (lines.empty()) return Fail(err, 400, "empty request line");
      end = pos;
      break;
    }
    if (lines.size() > limits.max_headers) {
      return Fail(err, 431, "more than " + std::to_string(limits.max_headers) + " header lines");
    }
    lines.push_back(line);
  }

  // The request line: METHOD SP target SP HTTP/1.x
  const std::string_view rl = lines[0];
  const size_t sp1 = rl.find(' ');
  const size_t sp2 = rl.rfind(' ');
  if (sp1 == std::string_view::npos || sp1 == sp2) return Fail(err, 400, "malformed request line");
  const std::string_view method = rl.substr(0, sp1);
  const std::string_view target = rl.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = rl.substr(sp2 + 1);
  if (method.empty() || method.size() > 16 ||
      !std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
    return Fail(err, 400, "malformed request method");
  }
  if (version == "HTTP/1.1") {
    req->minor_version = 1;
  } else if (version == "HTTP/1.0") {
    req->minor_version = 0;
  } else if (version.substr(0, 5) == "HTTP/") {
    return Fail(err, 505, "only HTTP/1.0 and HTTP/1.1 are served");
  } else {
    return Fail(err, 400, "malformed request line");
  }
  if (target.empty() || target[0] != '/' || !std::all_of(target.begin(), target.end(), [](char c) {
        return static_cast<unsigned char>(c) > 0x20 && c != 0x7f;
      })) {
    return Fail(err, 400, "the request target must be a path starting with /");
  }
  req->method = std::string(method);
  req->target = std::string(target);

  // Header fields.
  req->headers.clear();
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line[0] == ' ' || line[0] == '\t') return Fail(err, 400, "folded header lines are not accepted");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return Fail(err, 400, "malformed header line");
    const std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(),
                     [](char c) { return IsTokenChar(static_cast<unsigned char>(c)); })) {
      return Fail(err, 400, "malformed header name");
    }
    const std::string_view value = TrimOws(line.substr(colon + 1));
    for (char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) {
        return Fail(err, 400, "control characters in header " + std::string(name));
      }
    }
    req->headers.emplace_back(LowerAscii(name), std::string(value));
  }

  // Path and query.
  const size_t q = target.find('?');
  if (!DecodePercent(target.substr(0, q), false, &req->path)) {
    return Fail(err, 400, "malformed percent-encoding in the path");
  }
  req->params.clear();
  if (q != std::string_view::npos && !ParseQuery(target.substr(q + 1), limits.max_params, &req->params)) {
    return Fail(err, 400,
                "malformed query string (or more than " + std::to_string(limits.max_params) + " parameters)");
  }

  // Framing.
  std::string why;
  if (!ParseContentLength(*req, &req->content_length, &why)) return Fail(err, 400, why);
  req->chunked = false;
  if (req->header_count("transfer-encoding") > 0) {
    std::string te;
    for (const auto& [name, v] : req->headers)
      if (name == "transfer-encoding") te += (te.empty() ? "" : ",") + LowerAscii(v);
    if (std::string(TrimOws(te)) != "chunked") {
      return Fail(err, 501, "Transfer-Encoding \"" + te + "\" is not supported (only chunked)");
    }
    if (req->minor_version == 0) return Fail(err, 400, "chunked bodies need HTTP/1.1");
    if (req->content_length >= 0) return Fail(err, 400, "both Content-Length and Transfer-Encoding");
    req->chunked = true;
  }
  req->expect_continue = false;
  if (req->header_count("expect") > 0) {
    if (LowerAscii(req->header("expect")) != "100-continue" || req->header_count("expect") > 1) {
      return Fail(err, 417, "only \"Expect: 100-continue\" is supported");
    }
    req->expect_continue = req->minor_version == 1;
  }
  req->keep_alive = req->minor_version == 1;
  for (const auto& [name, v] : req->headers) {
    if (name != "connection") continue;
    const std::string tokens = LowerAscii(v);
    if (tokens.find("close") != std::string::npos)
      req->keep_alive = false;
    else if (tokens.find("keep-alive") != std::string::npos)
      req->keep_alive = true;
  }
  *consumed = end;
  return HeadResult::kDone;
}

size_t ChunkedDecoder::Fail(int status, std::string message, size_t consumed) {
  state_ = State::kFailed;
  error_ = ParseError{status, std::move(message)};
  return consumed;
}

size_t ChunkedDecoder::Feed(std::string_view in, std::string* body) {
  size_t i = 0;
  while (i < in.size()) {
    switch (state_) {
      case State::kDone:
      case State::kFailed:
        return i;
      case State::kData: {
        const size_t take =
            static_cast<size_t>(std::min<int64_t>(remaining_, static_cast<int64_t>(in.size() - i)));
        body->append(in.data() + i, take);
        i += take;
        remaining_ -= static_cast<int64_t>(take);
        if (remaining_ == 0) state_ = State::kDataEnd;
        break;
      }
      case State::kSize:
      case State::kDataEnd:
      case State::kTrailer: {
        const char c = in[i++];
        if (c != '\n') {
          line_.push_back(c);
          if (line_.size() > 4096) return Fail(400, "chunked body: a line over 4096 bytes", i);
          break;
        }
        std::string_view line = line_;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (state_ == State::kDataEnd) {
          if (!line.empty()) return Fail(400, "chunked body: data longer than its chunk size", i);
          state_ = State::kSize;
        } else if (state_ == State::kSize) {
          const std::string_view digits = TrimOws(line.substr(0, line.find(';')));
          if (digits.empty() || digits.size() > 15 ||
              !std::all_of(digits.begin(), digits.end(), [](char d) { return HexValue(d) >= 0; })) {
            return Fail(400, "chunked body: malformed chunk size", i);
          }
          int64_t size = 0;
          for (char d : digits) size = size * 16 + HexValue(d);
          if (size == 0) {
            state_ = State::kTrailer;
          } else {
            if (total_ + size > max_body_) {
              return Fail(413, "request body over the limit of " + std::to_string(max_body_) + " bytes", i);
            }
            total_ += size;
            remaining_ = size;
            state_ = State::kData;
          }
        } else {  // a trailer line, or the blank line that ends the body
          if (line.empty()) {
            state_ = State::kDone;
          } else if ((trailer_bytes_ += line_.size()) > (16u << 10)) {
            return Fail(431, "chunked body: trailers over 16384 bytes", i);
          }
        }
        line_.clear();
        break;
      }
    }
  }
  return i;
}

}  // namespace burst::http
