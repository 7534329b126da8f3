#include "store/s3_http.h"

#include <curl/curl.h>

#include <chrono>
#include <ctime>
#include <random>
#include <thread>

#include "core/fs.h"

namespace burst {
namespace {

std::once_flag g_curl_init;

struct Call {
  const S3Request* req;
  S3Response* resp;
  bool sink_failed = false;
  bool to_sink = false;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* call = static_cast<Call*>(user);
  std::string_view chunk(data, size * n);
  // Error bodies (and bodies without a sink) are collected; error bodies are small.
  if (!call->to_sink) {
    if (call->resp->body.size() < (64 << 20)) call->resp->body.append(chunk);
    return chunk.size();
  }
  if (!call->req->sink(chunk)) {
    call->sink_failed = true;
    return 0;  // aborts the transfer
  }
  return chunk.size();
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* call = static_cast<Call*>(user);
  std::string_view line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response (after a redirect or 100 Continue): judge its status
    // once the headers are in; until then collect.
    call->resp->etag.clear();
    size_t sp = line.find(' ');
    long status = sp == std::string_view::npos ? 0 : std::atol(std::string(line.substr(sp + 1, 3)).c_str());
    call->to_sink = call->req->sink && status >= 200 && status < 300;
    return line.size();
  }
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "etag") {
      std::string_view v = line.substr(colon + 1);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
      call->resp->etag = std::string(v);
    }
  }
  return line.size();
}

bool Retryable(long status, const std::string& code) {
  return status >= 500 || status == 429 || code == "SlowDown" || code == "RequestTimeout";
}

}  // namespace

std::string XmlUnescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 8) {
      out += s[i];
      continue;
    }
    std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp")
      out += '&';
    else if (ent == "lt")
      out += '<';
    else if (ent == "gt")
      out += '>';
    else if (ent == "quot")
      out += '"';
    else if (ent == "apos")
      out += '\'';
    else if (ent.size() > 1 && ent[0] == '#') {
      long v = ent[1] == 'x' ? std::strtol(std::string(ent.substr(2)).c_str(), nullptr, 16)
                             : std::strtol(std::string(ent.substr(1)).c_str(), nullptr, 10);
      if (v > 0 && v < 128)
        out += static_cast<char>(v);
      else
        out += '?';
    } else {
      out.append(s.substr(i, semi - i + 1));
    }
    i = semi;
  }
  return out;
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  size_t pos = 0;
  while (true) {
    size_t a = xml.find(open, pos);
    if (a == std::string_view::npos) break;
    a += open.size();
    size_t b = xml.find(close, a);
    if (b == std::string_view::npos) break;
    out.push_back(xml.substr(a, b - a));
    pos = b + close.size();
  }
  return out;
}

std::string XmlText(std::string_view xml, std::string_view tag) {
  auto els = XmlElements(xml, tag);
  return els.empty() ? "" : XmlUnescape(els.front());
}

S3Http::S3Http(S3Config config) : config_(std::move(config)) {
  std::call_once(g_curl_init, [] {
    // Deliberately unchecked beyond this: a failed global init makes every
    // later curl_easy_init fail, which Send reports.
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return;
  });
  size_t scheme = config_.endpoint.find("://");
  host_ = scheme == std::string::npos ? config_.endpoint : config_.endpoint.substr(scheme + 3);
  if (size_t slash = host_.find('/'); slash != std::string::npos) host_.resize(slash);
}

S3Http::~S3Http() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

std::string S3Http::Where() const { return "s3://" + config_.bucket + " at " + config_.endpoint; }

void* S3Http::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void S3Http::Release(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < 16) {
    idle_.push_back(handle);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
}

Result<S3Response> S3Http::Once(const S3Request& req, const std::string& payload_sha256, bool* retry,
                                std::string* failure) {
  *retry = false;
  CURL* curl = static_cast<CURL*>(Acquire());
  if (curl == nullptr) return Status(Code::kInternal, "cannot create a curl handle", "store");
  curl_easy_reset(curl);

  std::string path = "/" + config_.bucket;
  if (!req.object.empty()) path += "/" + req.object;
  std::string url = config_.endpoint;
  while (!url.empty() && url.back() == '/') url.pop_back();
  url += UriEncode(path, true);
  std::string query = CanonicalQuery(req.query);
  if (!query.empty()) url += "?" + query;

  SigV4Request sreq{req.method, path, req.query, req.headers, payload_sha256};
  sreq.headers.emplace_back("host", host_);
  HeaderList signed_headers = SignV4(sreq, config_.creds, config_.region, "s3", std::time(nullptr));
  curl_slist* hl = nullptr;
  for (const auto& [k, v] : signed_headers) hl = curl_slist_append(hl, (k + ": " + v).c_str());
  hl = curl_slist_append(hl, "Expect:");  // no 100-continue round trip
  if (req.method == "PUT" || req.method == "POST")
    hl = curl_slist_append(hl, "Content-Type: application/octet-stream");

  S3Response resp;
  Call call{&req, &resp};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(config_.connect_timeout_ms));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &call);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &call);
  if (req.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (req.method == "PUT" || req.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    if (req.method == "PUT") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
  } else if (req.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }

  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(hl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &resp.status);
  curl_off_t length = -1;
  curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
  resp.content_length = length;
  Release(curl);

  if (call.sink_failed) {
    return Status(Code::kUnavailable, "cannot store the body of " + path + " locally", "store");
  }
  if (rc != CURLE_OK) {
    *retry = true;
    *failure = std::string(curl_easy_strerror(rc));
    return Status(Code::kUnavailable, Where() + ": " + *failure, "store");
  }
  if (resp.status >= 200 && resp.status < 300) return resp;
  std::string code = XmlText(resp.body, "Code"), message = XmlText(resp.body, "Message");
  if (Retryable(resp.status, code)) {
    *retry = true;
    *failure = "HTTP " + std::to_string(resp.status) + (code.empty() ? "" : " " + code);
    return Status(Code::kUnavailable, Where() + " answered " + *failure, "store");
  }
  if (resp.status == 404 && (req.method == "HEAD" || req.method == "DELETE") && !req.object.empty()) {
    return resp;  // the caller decides what a missing object means
  }
  std::string detail = "HTTP " + std::to_string(resp.status) + (code.empty() ? "" : " " + code) +
                       (message.empty() ? "" : ": " + message);
  if (resp.status == 403 || resp.status == 401) {
    return Status(Code::kUnauthenticated,
                  Where() + " refused the credentials of access key \"" + config_.creds.access_key_id +
                      "\" (" + detail + "); check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY",
                  "store");
  }
  if (resp.status == 404) {
    if (code == "NoSuchBucket" || req.object.empty()) {
      return Status(Code::kNotFound, Where() + ": the bucket does not exist (" + detail + ")", "store");
    }
    return Status(Code::kNotFound, "no object " + path + " in " + Where(), "key");
  }
  return Status(Code::kFailedPrecondition,
                Where() + " refused " + req.method + " " + path + " (" + detail + ")", "store");
}

Result<S3Response> S3Http::Send(const S3Request& req, const std::string& what) {
  std::mt19937 rng(std::random_device{}());
  int delay_ms = 100;
  std::string failure;
  const std::string payload_sha256 = Sha256Hex(req.body);  // once: a retry sends the same bytes
  for (int attempt = 1;; ++attempt) {
    if (attempt > 1 && req.restart) {
      if (Status s = req.restart(); !s.ok()) return s;
    }
    bool retry = false;
    auto r = Once(req, payload_sha256, &retry, &failure);
    if (r.ok() || !retry) return r;
    if (attempt >= config_.max_attempts) {
      return Status(Code::kUnavailable,
                    what + ": " + Where() + " failed " + std::to_string(attempt) + " times, last: " + failure,
                    "store");
    }
    std::uniform_int_distribution<int> jitter(delay_ms / 2, delay_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
    delay_ms = std::min(delay_ms * 2, 5000);
  }
}

}  // namespace burst
