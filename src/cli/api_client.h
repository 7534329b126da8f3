// ApiClient: the CLI's side of Burst's HTTP API.
//
// The server URL and key come from flags or BURST_URL / BURST_API_KEY. An
// API error comes back as a Status carrying the server's code, message and
// param; a server that cannot be reached is kUnavailable with the URL named.
//
// Thread-safety: one client per thread.
#pragma once

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace CLI {
class App;
}

namespace burst {

struct ApiTarget {
  std::string url = "http://127.0.0.1:8470";
  std::string api_key;
};

// --url and --api-key (with their environment fallbacks) on `cmd`.
void AddApiTargetArgs(CLI::App* cmd, ApiTarget& target);

class ApiClient {
 public:
  explicit ApiClient(const ApiTarget& target);
  ~ApiClient();

  Result<Json> Get(const std::string& path);
  Result<std::string> GetRaw(const std::string& path);
  // GET into `file`, streamed (never all in memory): written beside it and
  // renamed when complete, so a failed download leaves nothing there.
  // `progress` is told the bytes so far, at most every 8 MiB. The bytes.
  Result<int64_t> GetToFile(const std::string& path, const std::filesystem::path& file,
                            const std::function<void(int64_t)>& progress = {});
  Result<Json> Delete(const std::string& path);
  // A JSON body; `headers` go beside the key (e.g. Idempotency-Key).
  Result<Json> Post(const std::string& path, const Json& body,
                    const std::vector<std::pair<std::string, std::string>>& headers = {});
  // multipart/form-data upload of a local file, plus plain form fields.
  Result<Json> Upload(const std::string& path, const std::string& file_field, const std::string& file_path,
                      const std::vector<std::pair<std::string, std::string>>& fields);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A `--training-file` style argument: an existing local path (not starting
// with "file-") is uploaded first (a line to `info` says so); anything else is
// taken as a file id. Returns the id.
std::string FileIdOrUpload(ApiClient& api, const std::string& arg, std::FILE* info);

}  // namespace burst
