#include "core/utc.h"

#include <ctime>

namespace burst {

std::string FormatUtc(int64_t unix_s, const char* format) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, format, &tm);
  return std::string(buf, n);
}

std::string UtcNow(const char* format) { return FormatUtc(static_cast<int64_t>(std::time(nullptr)), format); }

}  // namespace burst
