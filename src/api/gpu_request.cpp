#include "api/gpu_request.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "core/status.h"

namespace burst {

namespace {

GpuOption ParseOption(const Json& v, const std::string& field) {
  const std::string forms = "a GPU type (\"h100\"), a type and count (\"h100:2\"), \"any\" or \"any:2\"";
  if (!v.is_string()) BadField(field, "must be " + forms + ", a list of those, or null");
  const std::string text = v.get<std::string>();
  const size_t colon = text.find(':');
  GpuOption o;
  o.type = text.substr(0, colon);
  std::transform(o.type.begin(), o.type.end(), o.type.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  const bool type_ok =
      !o.type.empty() && o.type.size() <= 32 && std::all_of(o.type.begin(), o.type.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '-';
      });
  if (!type_ok) BadField(field, "\"" + text.substr(0, 64) + "\" is not " + forms);
  if (colon != std::string::npos) {
    const std::string n = text.substr(colon + 1);
    const bool digits = !n.empty() && n.size() <= 2 &&
                        std::all_of(n.begin(), n.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    o.count = digits ? std::stoll(n) : 0;
    if (o.count < 1 || o.count > kMaxGpusPerRequest) {
      BadField(field, "\"" + text.substr(0, 64) + "\": the count after ':' must be 1 to " +
                          std::to_string(kMaxGpusPerRequest));
    }
  }
  return o;
}

std::string Describe(const SlotPool& pool) {
  std::string s;
  for (const auto& [type, n] : pool.gpus) s += (s.empty() ? "" : ", ") + std::to_string(n) + " x " + type;
  if (pool.cpu_slots > 0) {
    s += (s.empty() ? "" : ", ") + std::to_string(pool.cpu_slots) + " CPU slot" +
         (pool.cpu_slots == 1 ? "" : "s");
    if (pool.threads_per_slot > 0) {
      s += " of " + std::to_string(pool.threads_per_slot) + " thread" +
           (pool.threads_per_slot == 1 ? "" : "s");
    }
  }
  return s.empty() ? "no slots" : s;
}

}  // namespace

GpuRequest ParseGpuRequest(const Json& value, const std::string& field) {
  GpuRequest r;
  if (value.is_null()) return r;
  if (!value.is_array()) {
    r.options.push_back(ParseOption(value, field));
    return r;
  }
  if (value.empty() || value.size() > kMaxGpuOptions) {
    BadField(field, "a list of 1 to " + std::to_string(kMaxGpuOptions) + " options in order of preference");
  }
  std::set<std::pair<std::string, int64_t>> seen;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    GpuOption o = ParseOption(value[i], at);
    if (!seen.insert({o.type, o.count}).second) BadField(at, "repeats an earlier option");
    r.options.push_back(std::move(o));
  }
  return r;
}

GpuOption CheckGpuRequest(const GpuRequest& request, const SlotPool& pool, const std::string& field) {
  for (const GpuOption& o : request.options) {
    if (o.type == "any") {
      for (const auto& [type, n] : pool.gpus)
        if (n >= o.count) return {type, o.count};
      continue;
    }
    auto it = pool.gpus.find(o.type);
    if (it != pool.gpus.end() && it->second >= o.count) return o;
  }
  const std::string asked = request.options.size() == 1 ? "this" : "any of these";
  BadField(field, "no slot of this server can ever give " + asked + " (its pool: " + Describe(pool) + ")" +
                      (pool.gpus.empty() ? "; leave gpu out to run on a CPU slot" : ""));
}

}  // namespace burst
