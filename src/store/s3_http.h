// The HTTP side of the s3:// store: signed requests to one bucket over
// libcurl, retried with backoff, and S3's XML error bodies turned into Status.
//
// Requests use path-style addressing (ENDPOINT/BUCKET/KEY), which radosgw,
// MinIO and AWS all accept, and carry the payload's sha256 (SigV4).
// Retried: transport failures (connect, reset, timeout, a stalled transfer:
// under 1 byte/s for 60 s), 5xx, 429 and S3's SlowDown/RequestTimeout, up to
// `max_attempts` in all, waiting 100 ms doubling to 5 s with jitter. Not
// retried: 4xx, which the caller hears of as:
//   403 -> kUnauthenticated naming the bucket, the endpoint and S3's code
//          (SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied);
//   404 -> kNotFound (NoSuchKey for an object, NoSuchBucket for the bucket);
//   other -> kFailedPrecondition with S3's code and message.
//
// Thread-safety: Send may be called from any thread at once; curl handles
// (and their kept-alive connections) are pooled.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/sigv4.h"

namespace burst {

struct S3Config {
  std::string endpoint;  // "https://s3.us-east-1.amazonaws.com", "http://127.0.0.1:7480"
  std::string bucket;
  std::string prefix;  // "" or ending in '/': keys are stored as PREFIX + key
  std::string region = "us-east-1";
  AwsCredentials creds;
  int64_t part_bytes = 16 << 20;  // objects above this go up in parts of this size
  int parallel_parts = 4;         // parts in flight at once
  int max_attempts = 5;
  int connect_timeout_ms = 10000;
};

struct S3Request {
  std::string method = "GET";
  std::string object;  // full object name in the bucket ("" for the bucket itself)
  QueryList query;
  HeaderList headers;     // extra headers (all signed)
  std::string_view body;  // must outlive the call
  // Where a 2xx body goes: nullptr collects it into S3Response::body. A sink
  // returns false to abort; `restart` (when set) is called before a retry
  // so the sink can drop what an aborted attempt gave it.
  std::function<bool(std::string_view)> sink;
  std::function<Status()> restart;
};

struct S3Response {
  long status = 0;
  std::string body;  // the response body (when no sink), or an error body
  std::string etag;  // the ETag header, quotes kept
  int64_t content_length = -1;
};

class S3Http {
 public:
  explicit S3Http(S3Config config);
  ~S3Http();
  S3Http(const S3Http&) = delete;
  S3Http& operator=(const S3Http&) = delete;

  // Sends with retries; a 2xx (or, for HEAD/DELETE of a missing key, the 404)
  // is returned as a response, any other outcome as the Status above.
  // `what` names the object in errors ("s3://bucket/key").
  Result<S3Response> Send(const S3Request& req, const std::string& what);

  const S3Config& config() const { return config_; }
  // "s3://bucket at http://host:port", for messages.
  std::string Where() const;

 private:
  Result<S3Response> Once(const S3Request& req, const std::string& payload_sha256, bool* retry,
                          std::string* failure);
  void* Acquire();
  void Release(void* handle);

  S3Config config_;
  std::string host_;  // authority of the endpoint, as sent in Host
  std::mutex mu_;
  std::vector<void*> idle_;  // CURL* handles
};

// Text of the first <tag>...</tag> in xml, entities decoded; "" when absent.
std::string XmlText(std::string_view xml, std::string_view tag);
// Every <tag>...</tag> element's inner text, raw (for nested parsing).
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag);
std::string XmlUnescape(std::string_view s);
std::string XmlEscape(std::string_view s);

}  // namespace burst
