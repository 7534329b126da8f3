// UTC times as text, in one place: the timestamps Burst writes (API
// objects, database rows, events, S3 signatures, CLI tables, the date a
// chat template is rendered with) are formatted here, by strftime on the
// UTC calendar.
#pragma once

#include <cstdint>
#include <string>

namespace burst {

// 2026-12-06T19:00:00Z: ISO 8601, as the API and the request log write it.
inline constexpr const char* kUtcIso8601 = "%Y-%m-%dT%H:%M:%SZ";
// 2026-12-06 19:00:00: SQLite's datetime('now'), as database rows and the
// CLI's tables have it.
inline constexpr const char* kUtcSql = "%Y-%m-%d %H:%M:%S";

// `unix_s` (seconds since 1970-01-01 UTC) in `format` (strftime's, C
// locale: Burst never sets another). At most 63 bytes of output.
std::string FormatUtc(int64_t unix_s, const char* format);
// The current time in `format`.
std::string UtcNow(const char* format);

}  // namespace burst
