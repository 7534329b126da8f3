#include "runtime/gpu_request.h"

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
  std::string s = DescribeGpuCounts(pool.gpus);
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

SlotPool PoolOf(const std::vector<GpuSlot>& gpus, int64_t cpu_slots, int64_t threads_per_slot) {
  return SlotPool{CountByType(gpus), cpu_slots, threads_per_slot};
}

std::vector<DeviceClaim> ResolveGpuRequest(const GpuRequest& request, const SlotPool& pool, int64_t workers,
                                           const std::string& field) {
  std::vector<DeviceClaim> out;
  auto add = [&](const std::string& type, int64_t count) {
    auto it = pool.gpus.find(type);
    if (it == pool.gpus.end() || it->second < count * workers) return;
    DeviceClaim c{type, count};
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  for (const GpuOption& o : request.options) {
    if (o.type != "any") {
      add(o.type, o.count);
      continue;
    }
    for (const auto& [type, n] : pool.gpus) add(type, o.count);
  }
  if (!out.empty()) return out;
  const std::string asked = request.options.size() == 1 ? "this" : "any of these";
  BadField(field, "no slot of this server can ever give " + asked +
                      (workers > 1 ? " to each of " + std::to_string(workers) + " workers at once" : "") +
                      " (its pool: " + Describe(pool) + ")" +
                      (pool.gpus.empty() ? "; leave gpu out to run on a CPU slot" : ""));
}

Json GpuRequestJson(const GpuRequest& request) {
  if (!request.Asks()) return Json();
  Json out = Json::array();
  for (const GpuOption& o : request.options)
    out.push_back(o.count == 1 ? o.type : o.type + ":" + std::to_string(o.count));
  return out;
}

Status TaskDevices(const Json& spec, const SlotPool& pool, int64_t workers, std::vector<DeviceClaim>* out) {
  out->clear();
  const Json none;
  const Json& field = spec.is_object() && spec.contains("gpu") ? spec["gpu"] : none;
  GpuRequest request;
  try {
    request = ParseGpuRequest(field, "gpu");
    if (!request.Asks()) return Status();
    *out = ResolveGpuRequest(request, pool, workers, "gpu");
    return Status();
  } catch (const Error& e) {
    for (const GpuOption& o : request.options)
      if (o.type != "any") out->push_back(DeviceClaim{o.type, o.count});
    // "any" alone, on a pool of no GPUs: waits for a type no pool has.
    if (out->empty() && request.Asks()) out->push_back(DeviceClaim{"gpu", request.options[0].count});
    return e.status();
  }
}

}  // namespace burst
