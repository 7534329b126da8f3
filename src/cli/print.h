// Small helpers the API commands (files, jobs, ...) share to print what a
// Burst server answers: API errors become exceptions, times print in UTC,
// absent or null fields print as "-".
//
// Thread-safety: stateless; printing runs on the main thread.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "core/json.h"
#include "core/states.h"
#include "core/status.h"
#include "core/utc.h"

namespace burst {

// The value, or the error thrown as burst::Error (RunCli prints it).
template <typename T>
T OrThrow(Result<T> r) {
  if (!r.ok()) throw Error(r.status());
  return std::move(r).value();
}

// j[key], or null when j is not an object or has no such field (Json's
// value() and operator[] throw or assert there).
inline const Json& Field(const Json& j, const char* key) {
  static const Json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

// obj[key], a unix time in seconds, as UTC "YYYY-MM-DD HH:MM:SS"; "-" when
// absent or null.
inline std::string When(const Json& obj, const char* key) {
  const Json& v = Field(obj, key);
  if (!v.is_number()) return "-";
  return FormatUtc(static_cast<int64_t>(v.get<double>()), kUtcSql);
}

// j[key] as text: strings as they are, numbers and objects as JSON, "-" when
// absent or null (Json::value throws on a null field).
inline std::string Str(const Json& j, const char* key, const std::string& none = "-") {
  const Json& v = Field(j, key);
  if (v.is_null()) return none;
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// obj["status"] (a job's, an evaluation's, a sweep's or a sweep run's) as
// the server named it; none for a name this CLI does not know (a newer
// server's) or a sweep run still "pending".
inline std::optional<JobStatus> StatusOf(const Json& obj) {
  const Json& v = Field(obj, "status");
  if (!v.is_string()) return std::nullopt;
  auto s = FromString<JobStatus>(v.get<std::string>());
  return s.ok() ? std::optional<JobStatus>(s.value()) : std::nullopt;
}

// The job, evaluation, sweep or run is over for good; one whose status
// this CLI does not know is not (it is polled until it is).
inline bool IsOver(const Json& obj) {
  const std::optional<JobStatus> s = StatusOf(obj);
  return s && IsTerminal(*s);
}

// j[key] as a number; `none` when absent, null or not a number.
inline double Num(const Json& j, const char* key, double none = 0) {
  const Json& v = Field(j, key);
  return v.is_number() ? v.get<double>() : none;
}

// The server's JSON as it came, indented (invalid UTF-8 becomes U+FFFD).
inline void PrintJson(const Json& j) {
  std::printf("%s\n", j.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
}

// A --gpu flag as the request's "gpu" (docs/api.md): "h100" or "h100:2" as
// given, "h100,any" a list in order of preference; the server checks it.
inline Json GpuField(const std::string& flag) {
  if (flag.find(',') == std::string::npos) return flag;
  Json list = Json::array();
  std::string item;
  for (const char c : flag + ",") {
    if (c != ',') {
      item += c;
    } else if (!item.empty()) {
      list.push_back(item);
      item.clear();
    }
  }
  return list;
}

}  // namespace burst
