// How Burst's API answers: one error shape, one mapping from Status to HTTP.
//
// Every 4xx/5xx body is {"error": {"code", "message", "param"}} (OpenAI's
// shape): code is the Status's reason when it has one ("capacity",
// "org_cap", "lease_lost": what a client acts on), else its code's name.
// Messages reach API users without the server's own folders in them, and an
// internal error is reported by an id whose details go to the server's log.
//
// Thread-safety: pure functions, plus the path list set once at start-up.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "api/http/message.h"
#include "core/json.h"
#include "core/status.h"

namespace burst {

// JSON request bodies are small; only uploads may use --max-body-mb.
constexpr int64_t kMaxJsonBody = 4 << 20;

// The HTTP status for a Status (its reason first, then its code).
int HttpStatusOf(const Status& s);
// The error object for a Status: {"error": {"code", "message", "param"}}.
Json ErrorJson(const Status& s);

// Folders of this server whose names must not reach API users: each prefix
// is replaced by its label in every error message ("/srv/models/x" becomes
// "models:x"). Set once before serving.
void SetPrivatePaths(const std::vector<std::pair<std::filesystem::path, std::string>>& paths);
// `message` with the private paths replaced.
std::string RedactPaths(const std::string& message);

void SendJson(http::Response& res, int status, const Json& body);
// Answers with s (4xx/5xx by HttpStatusOf); kInternal is logged with an id
// and answered with the id only. 429 capacity carries Retry-After.
void SendStatus(http::Response& res, const Status& s);
// The request body as a JSON object (depth-limited); nullopt after 400.
std::optional<Json> ReadBody(const http::Request& req, http::Response& res);
// ?limit= in 1..10000 (default 100); false after answering 400.
bool ReadLimit(const http::Request& req, http::Response& res, int64_t* limit);
// A query parameter or header value that will be stored or echoed: valid
// UTF-8 without control characters, at most `max_bytes`; false after 400.
bool CheckText(const std::string& value, const std::string& name, size_t max_bytes, http::Response& res);

// "YYYY-MM-DD" as unix seconds at 00:00 UTC; -1 when malformed, 0 when empty.
int64_t ParseDay(const std::string& day);

// A list page in OpenAI's shape: the first `limit` rows, rendered (the query
// asked for limit + 1 rows, so one more means has_more).
template <typename Row, typename Render>
Json Page(const std::vector<Row>& rows, int64_t limit, Render render) {
  Json data = Json::array();
  for (size_t i = 0; i < rows.size() && static_cast<int64_t>(i) < limit; ++i) data.push_back(render(rows[i]));
  return {{"object", "list"}, {"data", data}, {"has_more", static_cast<int64_t>(rows.size()) > limit}};
}

// r's value, or nullopt after answering with its error.
template <typename T>
std::optional<T> OrAnswer(Result<T> r, http::Response& res) {
  if (!r.ok()) {
    SendStatus(res, r.status());
    return std::nullopt;
  }
  return std::move(r).value();
}

// The bearer token of an Authorization header ("" when there is none).
std::string BearerToken(const http::Request& req);

}  // namespace burst
