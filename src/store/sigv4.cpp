#include "store/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>

#include "core/fs.h"
#include "core/utc.h"

namespace burst {

std::string UriEncode(std::string_view s, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string AmzDate(std::time_t t) { return FormatUtc(static_cast<int64_t>(t), "%Y%m%dT%H%M%SZ"); }

std::string HexEncode(std::string_view bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string CanonicalQuery(const QueryList& query) {
  std::vector<std::pair<std::string, std::string>> enc;
  enc.reserve(query.size());
  for (const auto& [k, v] : query) enc.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(enc.begin(), enc.end());
  std::string out;
  for (const auto& [k, v] : enc) {
    if (!out.empty()) out += '&';
    out += k + "=" + v;
  }
  return out;
}

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Header values are trimmed and inner runs of spaces folded to one.
std::string TrimValue(const std::string& v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

}  // namespace

HeaderList SignV4(const SigV4Request& req, const AwsCredentials& creds, const std::string& region,
                  const std::string& service, std::time_t now) {
  const std::string date = AmzDate(now);
  const std::string day = date.substr(0, 8);
  HeaderList headers = req.headers;
  headers.emplace_back("x-amz-date", date);
  headers.emplace_back("x-amz-content-sha256", req.payload_sha256);
  if (!creds.session_token.empty()) headers.emplace_back("x-amz-security-token", creds.session_token);

  std::vector<std::pair<std::string, std::string>> canon;
  canon.reserve(headers.size());
  for (const auto& [k, v] : headers) canon.emplace_back(Lower(k), TrimValue(v));
  std::sort(canon.begin(), canon.end());
  std::string canonical_headers, signed_headers;
  for (const auto& [k, v] : canon) {
    canonical_headers += k + ":" + v + "\n";
    if (!signed_headers.empty()) signed_headers += ';';
    signed_headers += k;
  }
  const std::string canonical_request = req.method + "\n" + UriEncode(req.path, true) + "\n" +
                                        CanonicalQuery(req.query) + "\n" + canonical_headers + "\n" +
                                        signed_headers + "\n" + req.payload_sha256;
  const std::string scope = day + "/" + region + "/" + service + "/aws4_request";
  const std::string string_to_sign =
      "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + Sha256Hex(canonical_request);
  std::string key = HmacSha256("AWS4" + creds.secret_access_key, day);
  key = HmacSha256(key, region);
  key = HmacSha256(key, service);
  key = HmacSha256(key, "aws4_request");
  const std::string signature = HexEncode(HmacSha256(key, string_to_sign));
  headers.emplace_back("Authorization", "AWS4-HMAC-SHA256 Credential=" + creds.access_key_id + "/" + scope +
                                            ",SignedHeaders=" + signed_headers + ",Signature=" + signature);
  return headers;
}

}  // namespace burst
