#include "api/respond.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "core/ids.h"
#include "core/utf8.h"

namespace burst {
namespace {

std::mutex paths_mu;
std::vector<std::pair<std::string, std::string>> private_paths;  // GUARDED_BY(paths_mu); longest first

}  // namespace

int HttpStatusOf(const Status& s) {
  if (s.reason() == "capacity" || s.reason() == "org_cap") return 429;
  if (s.reason() == "lease_lost") return 409;
  switch (s.code()) {
    case Code::kInvalidArgument:
      return 400;
    case Code::kUnauthenticated:
      return 401;
    case Code::kNotFound:
      return 404;
    case Code::kAlreadyExists:
      return 409;
    case Code::kFailedPrecondition:
      return 409;
    case Code::kResourceExhausted:
      return 429;
    case Code::kUnavailable:
      return 503;
    case Code::kUnimplemented:
      return 501;
    default:
      return 500;
  }
}

void SetPrivatePaths(const std::vector<std::pair<std::filesystem::path, std::string>>& paths) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [p, label] : paths) {
    std::error_code ec;
    std::filesystem::path canonical = std::filesystem::weakly_canonical(p, ec);
    for (const std::filesystem::path& form : {p, canonical}) {
      std::string s = form.lexically_normal().string();
      while (s.size() > 1 && s.back() == '/') s.pop_back();
      if (s.size() > 1) out.emplace_back(s, label);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::lock_guard<std::mutex> lock(paths_mu);
  private_paths = std::move(out);
}

std::string RedactPaths(const std::string& message) {
  std::lock_guard<std::mutex> lock(paths_mu);
  std::string out = message;
  for (const auto& [path, label] : private_paths) {
    for (size_t at = out.find(path); at != std::string::npos; at = out.find(path, at + label.size())) {
      size_t end = at + path.size();
      // "/srv/models/x" -> "models:x"; the folder itself -> "models:".
      if (end < out.size() && out[end] == '/') ++end;
      out.replace(at, end - at, label + ":");
    }
  }
  return out;
}

// OpenAI's error `type` for an answer: what its clients branch on (the
// openai packages raise a class per status; LangChain and others read type).
std::string ErrorType(const Status& s) {
  if (s.reason() == "org_cap") return "insufficient_quota";
  switch (HttpStatusOf(s)) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 429:
      return "rate_limit_error";
    default:
      return HttpStatusOf(s) >= 500 ? "server_error" : "invalid_request_error";
  }
}

Json ErrorJson(const Status& s) {
  Json error = StatusJson(Status(s.code(), RedactPaths(s.message()), RedactPaths(s.param()), s.reason()));
  error["type"] = ErrorType(s);
  // Which limit a 429 met, as Baseten's training API says it: the pool's
  // (capacity: retry later), the organisation's quota (org_cap) or its rate.
  if (s.reason() == "capacity" || s.reason() == "org_cap" || s.reason() == "rate_limit")
    error["details"] = {{"limit", s.reason()}};
  return {{"error", error}};
}

void SendJson(http::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(DumpJson(body), "application/json");
}

void SendStatus(http::Response& res, const Status& s) {
  if (s.code() == Code::kInternal) {
    // The details are for the operator: they may name files and hosts.
    const std::string id = NewId("err");
    std::fprintf(stderr, "burst serve: internal error %s: %s\n", id.c_str(), s.ToString().c_str());
    return SendJson(
        res, 500,
        ErrorJson(Status(Code::kInternal, "internal error " + id + " (the server's log has the details)")));
  }
  Json body = ErrorJson(s);
  if (s.reason() == "capacity") {
    res.set_header("Retry-After", "5");
    body["retry_after"] = 5;
  } else if (s.reason() == "standby") {
    res.set_header("Retry-After", "1");
  }
  SendJson(res, HttpStatusOf(s), body);
}

std::optional<Json> ReadBody(const http::Request& req, http::Response& res) {
  auto body = TryParseJson(req.body, "body");
  if (!body.ok()) {
    SendStatus(res, body.status());
    return std::nullopt;
  }
  if (!body.value().is_object()) {
    SendStatus(res, Status(Code::kInvalidArgument, "the request body must be a JSON object", "body"));
    return std::nullopt;
  }
  return std::move(body).value();
}

bool ReadLimit(const http::Request& req, http::Response& res, int64_t* limit) {
  *limit = 100;
  if (!req.has_param("limit")) return true;
  const std::string v = req.param("limit");
  char* end = nullptr;
  *limit = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || *limit < 1 || *limit > 10000) {
    SendStatus(res, Status(Code::kInvalidArgument, "limit must be an integer in 1..10000", "limit"));
    return false;
  }
  return true;
}

bool CheckText(const std::string& value, const std::string& name, size_t max_bytes, http::Response& res) {
  std::string why;
  if (value.size() > max_bytes) {
    why = "over " + std::to_string(max_bytes) + " bytes";
  } else if (!IsValidUtf8(value)) {
    why = "not valid UTF-8";
  } else {
    for (unsigned char c : value) {
      if (c < 0x20 || c == 0x7f) {
        why = "contains control characters";
        break;
      }
    }
  }
  if (why.empty()) return true;
  SendStatus(res, Status(Code::kInvalidArgument, name + " is " + why, name));
  return false;
}

int64_t ParseDay(const std::string& day) {
  if (day.empty()) return 0;
  std::tm tm{};
  const char* end = strptime(day.c_str(), "%Y-%m-%d", &tm);
  if (!end || *end != '\0') return -1;
  return static_cast<int64_t>(timegm(&tm));
}

std::string BearerToken(const http::Request& req) {
  const std::string h = req.header("authorization");
  if (h.size() < 7) return "";
  std::string scheme = h.substr(0, 7);
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return scheme == "bearer " ? h.substr(7) : "";
}

}  // namespace burst
