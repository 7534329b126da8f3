#include "api/http/router.h"

namespace burst::http {
namespace {

std::vector<std::string> Split(std::string_view path) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t slash = path.find('/', pos);
    out.emplace_back(
        path.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos));
    if (slash == std::string_view::npos) break;
    pos = slash + 1;
  }
  return out;
}

// Ids and names: letters, digits, '.', '_', '-', and ':' (a checkpoint's
// name, JOB:step-N, in /v1/models/{id}).
bool IsCaptureChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-' || c == ':';
}

bool SegmentsMatch(const std::vector<std::string>& pattern, const std::vector<std::string>& path,
                   std::vector<std::string>* captures) {
  if (pattern.size() != path.size()) return false;
  std::vector<std::string> got;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == "{}") {
      const std::string& seg = path[i];
      if (seg.empty() || seg.size() > 256) return false;
      for (char c : seg)
        if (!IsCaptureChar(c)) return false;
      got.push_back(seg);
    } else if (pattern[i] != path[i]) {
      return false;
    }
  }
  if (captures) captures->insert(captures->end(), got.begin(), got.end());
  return true;
}

}  // namespace

void Router::Add(std::string method, std::string pattern, int64_t max_body, Admit admit, Handler handler,
                 RouteOptions options) {
  Route r;
  r.method = std::move(method);
  r.segments = Split(pattern);
  r.pattern = std::move(pattern);
  r.max_body = max_body;
  r.admit = std::move(admit);
  r.handler = std::move(handler);
  r.options = std::move(options);
  routes_.push_back(std::move(r));
}

Router::Match Router::Find(std::string_view method, std::string_view path,
                           std::vector<std::string>* captures) const {
  Match m;
  if (path.size() > 4096) return m;
  const std::vector<std::string> segs = Split(path);
  for (const Route& r : routes_) {
    if (!SegmentsMatch(r.segments, segs, nullptr)) continue;
    if (r.method == method) {
      captures->clear();
      captures->emplace_back(path);
      SegmentsMatch(r.segments, segs, captures);
      m.route = &r;
      m.status = 200;
      return m;
    }
    if (m.allow.find(r.method) == std::string::npos) m.allow += (m.allow.empty() ? "" : ", ") + r.method;
    m.status = 405;
  }
  return m;
}

}  // namespace burst::http
