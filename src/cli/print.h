// Small helpers the API commands (files, jobs, ...) share to print what a
// Burst server answers: API errors become exceptions, times print in UTC,
// absent or null fields print as "-".
//
// Thread-safety: stateless; printing runs on the main thread.
#pragma once

#include <cstdio>
#include <ctime>
#include <string>

#include "core/json.h"
#include "core/status.h"

namespace burst {

// The value, or the error thrown as burst::Error (RunCli prints it).
template <typename T>
T OrThrow(Result<T> r) {
  if (!r.ok()) throw Error(r.status());
  return std::move(r).value();
}

// obj[key], a unix time in seconds, as UTC "YYYY-MM-DD HH:MM:SS"; "-" when
// absent or null.
inline std::string When(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return "-";
  std::time_t t = static_cast<std::time_t>(it->get<double>());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// j[key] as text: strings as they are, numbers and objects as JSON, "-" when
// absent or null (Json::value throws on a null field).
inline std::string Str(const Json& j, const char* key, const std::string& none = "-") {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return none;
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// j[key] as a number; `none` when absent, null or not a number.
inline double Num(const Json& j, const char* key, double none = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : none;
}

// The server's JSON as it came, indented (invalid UTF-8 becomes U+FFFD).
inline void PrintJson(const Json& j) {
  std::printf("%s\n", j.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
}

}  // namespace burst
