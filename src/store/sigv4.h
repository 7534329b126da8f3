// AWS Signature Version 4 for S3 requests (header-based, single chunk).
//
// Sign() builds the canonical request from the method, the path, the query
// parameters and the headers given, and returns the headers to send: the
// given ones plus x-amz-date, x-amz-content-sha256, x-amz-security-token
// (when the credentials carry a session token) and Authorization. Every header
// given is signed; `host` must be among them. The payload is named by its
// sha256 (hex) or "UNSIGNED-PAYLOAD".
//
// Checked against the worked examples of the S3 API reference
// (sigv4_test.cpp) and against a real radosgw, which verifies signatures
// (tests/s3/).
//
// Thread-safety: pure functions.
#pragma once

#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace burst {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty unless temporary credentials
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;
using QueryList = std::vector<std::pair<std::string, std::string>>;

struct SigV4Request {
  std::string method;          // "GET", "PUT", ...
  std::string path;            // unencoded, starting with '/': "/bucket/key"
  QueryList query;             // unencoded names and values, any order
  HeaderList headers;          // must include "host"
  std::string payload_sha256;  // hex digest of the body, or "UNSIGNED-PAYLOAD"
};

// RFC 3986 unreserved characters stay, everything else is %XX (upper hex);
// '/' stays when keep_slash (paths), else it is encoded (query values).
std::string UriEncode(std::string_view s, bool keep_slash);

// "20130524T000000Z" for a UTC time.
std::string AmzDate(std::time_t t);

// The headers to send, Authorization last.
HeaderList SignV4(const SigV4Request& req, const AwsCredentials& creds, const std::string& region,
                  const std::string& service, std::time_t now);

// The canonical query string of `query` (sorted by encoded name, then value).
std::string CanonicalQuery(const QueryList& query);

std::string HmacSha256(std::string_view key, std::string_view data);  // raw bytes
std::string HexEncode(std::string_view bytes);

}  // namespace burst
