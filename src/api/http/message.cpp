#include "api/http/message.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace burst::http {

std::shared_ptr<BodyFile> BodyFile::Create(const std::string& dir) {
  const std::string where = dir.empty() ? "/tmp" : dir;
  int fd = ::open(where.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {  // a filesystem without O_TMPFILE: a named file, unlinked at once
    std::string path = where + "/burst-body-XXXXXX";
    fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd < 0) return nullptr;
    ::unlink(path.c_str());
  }
  std::shared_ptr<BodyFile> f(new BodyFile());
  f->fd_ = fd;
  return f;
}

BodyFile::~BodyFile() {
  if (map_) ::munmap(map_, mapped_);
  if (fd_ >= 0) ::close(fd_);
}

bool BodyFile::Append(std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
    size_ += n;
  }
  return true;
}

std::string_view BodyFile::View() {
  if (size_ == 0) return {};
  if (!map_ || mapped_ != static_cast<size_t>(size_)) {
    if (map_) ::munmap(map_, mapped_);
    map_ = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_PRIVATE, fd_, 0);
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      mapped_ = 0;
      return {};
    }
    mapped_ = static_cast<size_t>(size_);
    ::madvise(map_, mapped_, MADV_SEQUENTIAL);
  }
  return {static_cast<const char*>(map_), mapped_};
}

std::string Request::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return "";
}

size_t Request::header_count(std::string_view name) const {
  size_t n = 0;
  for (const auto& h : headers) n += h.first == name;
  return n;
}

bool Request::has_param(std::string_view name) const {
  for (const auto& p : params)
    if (p.first == name) return true;
  return false;
}

std::string Request::param(std::string_view name) const {
  for (const auto& [k, v] : params)
    if (k == name) return v;
  return "";
}

const char* StatusText(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

std::string SerializeHead(const Response& res, bool close) {
  std::string out = "HTTP/1.1 " + std::to_string(res.status) + " " + StatusText(res.status) + "\r\n";
  const bool has_body = res.status != 204 && res.status != 304 && res.status >= 200;
  if (has_body) {
    out += "Content-Type: " + res.content_type + "\r\n";
    if (res.stream) {
      out += "Transfer-Encoding: chunked\r\n";
    } else {
      out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
    }
  }
  for (const auto& [k, v] : res.headers) {
    // A value never ends the header block early (no header injection).
    std::string clean = v;
    for (char& c : clean)
      if (c == '\r' || c == '\n') c = ' ';
    out += k + ": " + clean + "\r\n";
  }
  out += close ? "Connection: close\r\n" : "Connection: keep-alive\r\n";
  out += "\r\n";
  return out;
}

}  // namespace burst::http
