#include "api/http/multipart.h"

#include <cctype>

#include "api/http/request_parser.h"

namespace burst::http {
namespace {

constexpr size_t kMaxPartHeaderBytes = 8 << 10;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status Bad(const std::string& message) {
  return Status(Code::kInvalidArgument, "multipart body: " + message, "file");
}

// Parameters of a header value after its first ';': name=token or
// name="quoted \"string\"". Names lower-cased. False when malformed.
bool ParseParams(std::string_view s, std::vector<std::pair<std::string, std::string>>* out) {
  size_t i = s.find(';');
  if (i == std::string_view::npos) return true;
  ++i;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == ';')) ++i;
    if (i >= s.size()) break;
    const size_t eq = s.find('=', i);
    if (eq == std::string_view::npos) return false;
    std::string name = LowerAscii(Trim(s.substr(i, eq - i)));
    if (name.empty()) return false;
    i = eq + 1;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    std::string value;
    if (i < s.size() && s[i] == '"') {
      ++i;
      bool closed = false;
      while (i < s.size()) {
        const char c = s[i++];
        if (c == '\\' && i < s.size()) {
          value.push_back(s[i++]);
        } else if (c == '"') {
          closed = true;
          break;
        } else {
          value.push_back(c);
        }
      }
      if (!closed) return false;
    } else {
      const size_t semi = s.find(';', i);
      value =
          std::string(Trim(s.substr(i, semi == std::string_view::npos ? std::string_view::npos : semi - i)));
      i = semi == std::string_view::npos ? s.size() : semi;
    }
    out->emplace_back(std::move(name), std::move(value));
  }
  return true;
}

}  // namespace

std::optional<std::string> MultipartBoundary(std::string_view content_type) {
  const size_t semi = content_type.find(';');
  if (LowerAscii(Trim(content_type.substr(0, semi))) != "multipart/form-data") return std::nullopt;
  std::vector<std::pair<std::string, std::string>> params;
  if (!ParseParams(content_type, &params)) return std::nullopt;
  for (const auto& [k, v] : params) {
    // RFC 2046: 1 to 70 characters, not ending in a space.
    if (k == "boundary" && !v.empty() && v.size() <= 70 && v.back() != ' ') return v;
  }
  return std::nullopt;
}

const Part* FindPart(const std::vector<Part>& parts, std::string_view name) {
  for (const Part& p : parts)
    if (p.name == name) return &p;
  return nullptr;
}

Result<std::vector<Part>> ParseMultipart(std::string_view body, std::string_view boundary, size_t max_parts) {
  if (boundary.empty()) return Bad("no boundary");
  const std::string dash = "--" + std::string(boundary);
  const std::string delimiter = "\r\n" + dash;
  // The first boundary may open the body or follow a preamble.
  size_t pos;
  if (body.substr(0, dash.size()) == dash) {
    pos = dash.size();
  } else {
    const size_t at = body.find(delimiter);
    if (at == std::string_view::npos) return Bad("no boundary line");
    pos = at + delimiter.size();
  }
  std::vector<Part> parts;
  while (true) {
    // After a boundary: "--" ends the body, CRLF starts a part (transport
    // padding before it is allowed).
    if (body.substr(pos, 2) == "--") break;
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;
    if (body.substr(pos, 2) != "\r\n") return Bad("malformed boundary line");
    pos += 2;
    if (parts.size() >= max_parts) return Bad("more than " + std::to_string(max_parts) + " parts");
    // The part's headers end with a blank line (right away when it has none).
    std::string_view head;
    if (body.substr(pos, 2) == "\r\n") {
      pos += 2;
    } else {
      const size_t head_end = body.find("\r\n\r\n", pos);
      if (head_end == std::string_view::npos || head_end - pos > kMaxPartHeaderBytes) {
        return Bad("a part's headers are unterminated or over 8192 bytes");
      }
      head = body.substr(pos, head_end - pos);
      pos = head_end + 4;
    }
    Part part;
    bool has_disposition = false;
    while (!head.empty()) {
      const size_t eol = head.find("\r\n");
      std::string_view line = head.substr(0, eol);
      head = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 2);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) return Bad("malformed part header");
      const std::string name = LowerAscii(Trim(line.substr(0, colon)));
      const std::string_view value = Trim(line.substr(colon + 1));
      if (name == "content-type") {
        part.content_type = std::string(value);
      } else if (name == "content-disposition") {
        has_disposition = true;
        if (LowerAscii(Trim(value.substr(0, value.find(';')))) != "form-data") {
          return Bad("Content-Disposition must be form-data");
        }
        std::vector<std::pair<std::string, std::string>> params;
        if (!ParseParams(value, &params)) return Bad("malformed Content-Disposition");
        for (auto& [k, v] : params) {
          if (k == "name") {
            part.name = std::move(v);
          } else if (k == "filename") {
            if (!part.filename) part.filename = std::move(v);
          } else if (k == "filename*") {
            // RFC 5987: charset'language'percent-encoded; it wins over filename.
            const size_t q1 = v.find('\'');
            const size_t q2 = q1 == std::string::npos ? std::string::npos : v.find('\'', q1 + 1);
            std::string decoded;
            if (q2 == std::string::npos || LowerAscii(v.substr(0, q1)) != "utf-8" ||
                !DecodePercent(std::string_view(v).substr(q2 + 1), false, &decoded)) {
              return Bad("malformed filename*");
            }
            part.filename = std::move(decoded);
          }
        }
      }
    }
    if (!has_disposition || part.name.empty())
      return Bad("a part without Content-Disposition: form-data; name=...");
    const size_t next = body.find(delimiter, pos);
    if (next == std::string_view::npos) return Bad("the last part is not closed by its boundary");
    part.content = body.substr(pos, next - pos);
    parts.push_back(std::move(part));
    pos = next + delimiter.size();
  }
  return parts;
}

}  // namespace burst::http
