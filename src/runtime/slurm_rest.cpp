// The slurmrestd transport (OpenAPI v0.0.38, Slurm 22.05) over libcurl.
#include <curl/curl.h>

#include <cstdio>
#include <mutex>

#include "core/json.h"
#include "runtime/slurm_client.h"

namespace burst {
namespace {

constexpr const char* kApi = "/slurm/v0.0.38";
// An answer this large is no job listing Burst asked for.
constexpr size_t kMaxAnswerBytes = 64 << 20;

struct Answer {
  long status = 0;
  std::string body;
  bool too_large = false;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* a = static_cast<Answer*>(user);
  if (a->body.size() + size * n > kMaxAnswerBytes) {
    a->too_large = true;
    return 0;  // curl stops with a write error
  }
  a->body.append(data, size * n);
  return size * n;
}

// Slurm's errors array as one line ("" when there is none).
std::string Errors(const Json& j) {
  std::string out;
  if (!j.is_object() || !j.contains("errors") || !j["errors"].is_array()) return out;
  for (const Json& e : j["errors"]) {
    if (!e.is_object()) continue;
    std::string m = e.value("error", "");
    if (e.contains("description") && e["description"].is_string())
      m += " (" + e["description"].get<std::string>() + ")";
    if (!m.empty()) out += (out.empty() ? "" : "; ") + m;
  }
  return out;
}

class SlurmRest : public SlurmClient {
 public:
  SlurmRest(std::string url, std::string user, std::string token, int64_t timeout_ms)
      : user_(std::move(user)), token_(std::move(token)), timeout_ms_(timeout_ms) {
    if (url.rfind("unix:", 0) == 0) {
      socket_ = url.substr(5);
      base_ = "http://slurmrestd";
    } else {
      while (!url.empty() && url.back() == '/') url.pop_back();
      base_ = url;
    }
    shown_ = "slurmrestd at " + (socket_.empty() ? base_ : "unix:" + socket_);
  }

  Result<std::string> Submit(const SlurmJobSpec& spec) override {
    Json job = {{"name", spec.name},
                {"tasks", std::max(1, spec.tasks)},
                {"cpus_per_task", std::max(1, spec.cpus)},
                // Burst requeues the task itself (as preempted).
                {"requeue", false},
                // The script exports everything the worker needs (as --export=NONE).
                {"environment", {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}},
                {"current_working_directory", "/tmp"},
                {"standard_output", spec.output},
                {"open_mode", "append"}};
    // No time-limit warning: 22.05's REST API cannot aim it at the batch
    // shell (no "B:"), and the worker is the batch shell (slurm_client.h).
    if (!spec.partition.empty()) job["partition"] = spec.partition;
    if (!spec.account.empty()) job["account"] = spec.account;
    if (!spec.gres.empty()) job["gres"] = spec.gres;
    if (spec.mem_mb > 0) job["memory_per_node"] = spec.mem_mb;
    auto a =
        Call("POST", std::string(kApi) + "/job/submit", Json{{"script", spec.script}, {"job", job}}.dump());
    if (!a.ok()) return a.status();
    const Json j = Json::parse(a.value().body, nullptr, /*allow_exceptions=*/false);
    const std::string errors = Errors(j);
    if (a.value().status != 200 || !errors.empty() || !j.is_object() || !j.contains("job_id") ||
        !j["job_id"].is_number_integer()) {
      return Status(
          Code::kUnavailable,
          "HTTP " + std::to_string(a.value().status) + ": " + (errors.empty() ? JsonPreview(j, 300) : errors),
          "executor");
    }
    return std::to_string(j["job_id"].get<int64_t>());
  }

  std::optional<std::map<std::string, SlurmJobState>> Queue(const std::vector<std::string>& names) override {
    std::map<std::string, SlurmJobState> out;
    if (names.empty()) return out;
    auto a = Call("GET", std::string(kApi) + "/jobs", "");
    const Json j = a.ok() ? Json::parse(a.value().body, nullptr, /*allow_exceptions=*/false) : Json();
    if (!a.ok() || a.value().status != 200 || !j.is_object() || !j.contains("jobs") ||
        !j["jobs"].is_array()) {
      std::fprintf(stderr,
                   "burst serve: listing jobs from %s failed (workers' exits are read again next time): %s\n",
                   shown_.c_str(),
                   !a.ok() ? a.status().ToString().c_str()
                           : ("HTTP " + std::to_string(a.value().status) + " " + Errors(j)).c_str());
      return std::nullopt;
    }
    std::map<std::string, bool> wanted;
    for (const auto& n : names) wanted[n] = true;
    for (const Json& e : j["jobs"]) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("job_id") ||
          !e["job_id"].is_number_integer() || !e.contains("job_state") || !e["job_state"].is_string()) {
        continue;
      }
      const std::string name = e["name"].get<std::string>();
      if (!wanted.count(name)) continue;
      const int64_t id = e["job_id"].get<int64_t>();
      auto cur = out.find(name);
      if (cur == out.end() || id > std::stoll(cur->second.id))
        out[name] = {std::to_string(id), e["job_state"]};
    }
    return out;
  }

  Result<std::vector<GpuSlot>> Gpus(const std::string& partition) override {
    auto a = Call("GET", std::string(kApi) + "/nodes", "");
    const Json j = a.ok() ? Json::parse(a.value().body, nullptr, /*allow_exceptions=*/false) : Json();
    if (!a.ok()) return a.status();
    if (a.value().status != 200 || !j.is_object() || !j.contains("nodes") || !j["nodes"].is_array()) {
      return Status(Code::kUnavailable,
                    "listing nodes from " + shown_ + " failed: HTTP " + std::to_string(a.value().status) +
                        " " + Errors(j),
                    "gpus");
    }
    std::map<std::string, int64_t> counts;
    for (const Json& n : j["nodes"]) {
      if (!n.is_object() || !n.contains("gres") || !n["gres"].is_string()) continue;
      bool in = partition.empty();  // 22.05 does not mark the default partition: every node then
      const Json parts = n.value("partitions", Json::array());
      for (const Json& p : parts) in = in || (p.is_string() && p.get<std::string>() == partition);
      if (in) AddGresGpus(n["gres"].get<std::string>(), &counts);
    }
    return GpuSlotsOf(counts, "partition " + (partition.empty() ? "(default)" : partition));
  }

  // A job's every process gets the signal (22.05 has no batch-only or
  // steps-only choice here; this transport runs no gangs in one job).
  Status Stop(const std::string& id, bool term_only, bool /*batch_shell*/) override {
    auto a =
        Call("DELETE", std::string(kApi) + "/job/" + id + (term_only ? "?signal=TERM" : "?signal=KILL"), "");
    if (!a.ok()) return a.status();
    if (a.value().status != 200) {
      const Json j = Json::parse(a.value().body, nullptr, /*allow_exceptions=*/false);
      return Status(Code::kUnavailable,
                    shown_ + ": cancelling job " + id + " answered HTTP " + std::to_string(a.value().status) +
                        " " + Errors(j),
                    "executor");
    }
    return Status();
  }

  std::string Name() const override { return shown_; }

 private:
  Result<Answer> Call(const std::string& method, const std::string& path, const std::string& body) {
    CURL* curl = curl_easy_init();
    if (curl == nullptr) return Status(Code::kInternal, "cannot create a curl handle", "executor");
    Answer a;
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Accept: application/json");
    if (!body.empty()) headers = curl_slist_append(headers, "Content-Type: application/json");
    if (!token_.empty()) {
      headers = curl_slist_append(headers, ("X-SLURM-USER-NAME: " + user_).c_str());
      headers = curl_slist_append(headers, ("X-SLURM-USER-TOKEN: " + token_).c_str());
    }
    const std::string url = base_ + path;
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    if (!socket_.empty()) curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, socket_.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms_));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min<int64_t>(timeout_ms_, 10'000)));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
    if (!body.empty()) {
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    }
    const CURLcode rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &a.status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (a.too_large) {
      return Status(Code::kUnavailable, shown_ + " answered " + method + " " + path + " with over 64 MiB",
                    "executor");
    }
    if (rc != CURLE_OK) {
      return Status(Code::kUnavailable, "cannot reach " + shown_ + ": " + curl_easy_strerror(rc), "executor");
    }
    return a;
  }

  std::string base_, socket_, shown_, user_, token_;
  int64_t timeout_ms_;
};

}  // namespace

std::unique_ptr<SlurmClient> NewSlurmRest(const std::string& url, const std::string& user,
                                          const std::string& token, int64_t timeout_ms) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  return std::make_unique<SlurmRest>(url, user, token, timeout_ms);
}

}  // namespace burst
