// multipart/form-data (RFC 7578), as `POST /v1/files` receives it.
//
// ParseMultipart splits a body into its parts without copying their
// content (each Part views the body, which must outlive it), reading each
// part's Content-Disposition name and filename (quoted, backslash-escaped,
// or RFC 5987 filename*=UTF-8''...) and Content-Type. Malformed input is
// kInvalidArgument naming what is wrong; the number of parts and the size of
// their headers are bounded.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace burst::http {

struct Part {
  std::string name;
  std::optional<std::string> filename;  // absent: a plain field
  std::string content_type;             // "" when the part has none
  std::string_view content;
};

// The boundary parameter of a "multipart/form-data; boundary=..." value, or
// nullopt when the type is another or the boundary is missing or malformed.
std::optional<std::string> MultipartBoundary(std::string_view content_type);

Result<std::vector<Part>> ParseMultipart(std::string_view body, std::string_view boundary,
                                         size_t max_parts = 16);

// The first part named `name`, or nullptr.
const Part* FindPart(const std::vector<Part>& parts, std::string_view name);

}  // namespace burst::http
