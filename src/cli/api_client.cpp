#include "cli/api_client.h"

#include <httplib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "core/fs.h"

namespace burst {

void AddApiTargetArgs(CLI::App* cmd, ApiTarget& target) {
  cmd->add_option("--url", target.url, "Burst server URL")->capture_default_str()->envname("BURST_URL");
  cmd->add_option("--api-key", target.api_key, "API key (burst serve writes the first one to DATA/admin.key)")
      ->envname("BURST_API_KEY");
}

struct ApiClient::Impl {
  ApiTarget target;
  httplib::Client http;
  explicit Impl(const ApiTarget& t) : target(t), http(t.url) {
    http.set_read_timeout(300, 0);
    http.set_tcp_nodelay(true);
    http.set_write_timeout(300, 0);
  }

  httplib::Headers Headers() const { return {{"Authorization", "Bearer " + target.api_key}}; }

  Status Check() const {
    if (target.api_key.empty()) {
      return Status(Code::kInvalidArgument,
                    "no API key: pass --api-key or set BURST_API_KEY (burst serve wrote the first one "
                    "to DATA/admin.key)",
                    "api-key");
    }
    return Status();
  }

  Result<std::string> Body(const httplib::Result& r) const {
    if (!r) {
      return Status(Code::kUnavailable,
                    "cannot reach " + target.url + " (" + httplib::to_string(r.error()) +
                        "); is `burst serve` running there?",
                    "url");
    }
    if (r->status >= 400) return ErrorOf(r->status, r->body);
    return r->body;
  }

  Status ErrorOf(int status, const std::string& body) const {
    Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("error") && j["error"].is_object())
      return StatusFromJson(j["error"], status);
    // Not Burst's error shape (a proxy's page, say): the HTTP status decides.
    const Status s = StatusFromJson(Json(), status);
    return Status(s.code(), "HTTP " + std::to_string(status) + " from " + target.url);
  }

  Result<Json> JsonBody(const httplib::Result& r) const {
    auto body = Body(r);
    if (!body.ok()) return body.status();
    if (r->status == 204) return Json();
    Json j = Json::parse(body.value(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Status(Code::kInternal, "the server answered with invalid JSON");
    return j;
  }
};

ApiClient::ApiClient(const ApiTarget& target) : impl_(std::make_unique<Impl>(target)) {}
ApiClient::~ApiClient() = default;

Result<Json> ApiClient::Get(const std::string& path) {
  if (Status s = impl_->Check(); !s.ok()) return s;
  return impl_->JsonBody(impl_->http.Get(path, impl_->Headers()));
}

Result<std::string> ApiClient::GetRaw(const std::string& path) {
  if (Status s = impl_->Check(); !s.ok()) return s;
  return impl_->Body(impl_->http.Get(path, impl_->Headers()));
}

Result<int64_t> ApiClient::GetToFile(const std::string& path, const std::filesystem::path& file,
                                     const std::function<void(int64_t)>& progress) {
  if (Status s = impl_->Check(); !s.ok()) return s;
  std::filesystem::path part = file;
  part += ".part." + std::to_string(::getpid());
  std::FILE* out = std::fopen(part.c_str(), "wb");
  if (out == nullptr) return IoStatus(errno, "cannot create", part, Code::kInternal);
  int status = 0;
  int64_t bytes = 0, reported = 0;
  std::string error_body;  // an error answer's body, bounded
  bool write_failed = false;
  int write_errno = 0;
  httplib::Result r = impl_->http.Get(
      path, impl_->Headers(),
      [&](const httplib::Response& res) {
        status = res.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (status >= 400) {
          if (error_body.size() < (64u << 10))
            error_body.append(data, std::min(n, (64u << 10) - error_body.size()));
          return true;
        }
        if (std::fwrite(data, 1, n, out) != n) {
          write_failed = true;
          write_errno = errno;
          return false;
        }
        bytes += static_cast<int64_t>(n);
        if (progress && bytes - reported >= (8 << 20)) progress(reported = bytes);
        return true;
      });
  const bool closed = std::fclose(out) == 0;
  auto fail = [&](Status s) {
    std::error_code ec;
    std::filesystem::remove(part, ec);
    return s;
  };
  if (write_failed) return fail(IoStatus(write_errno, "cannot write", part, Code::kInternal));
  if (!r) return fail(impl_->Body(r).status());
  if (status >= 400) return fail(impl_->ErrorOf(status, error_body));
  if (!closed) return fail(IoStatus(errno, "cannot write", part, Code::kInternal));
  std::error_code ec;
  std::filesystem::rename(part, file, ec);
  if (ec)
    return fail(
        Status(Code::kInternal, "cannot rename into " + file.string() + ": " + ec.message(), file.string()));
  if (progress) progress(bytes);
  return bytes;
}

Result<Json> ApiClient::Delete(const std::string& path) {
  if (Status s = impl_->Check(); !s.ok()) return s;
  return impl_->JsonBody(impl_->http.Delete(path, impl_->Headers()));
}

Result<Json> ApiClient::Post(const std::string& path, const Json& body,
                             const std::vector<std::pair<std::string, std::string>>& headers) {
  if (Status s = impl_->Check(); !s.ok()) return s;
  httplib::Headers h = impl_->Headers();
  for (const auto& [k, v] : headers) h.emplace(k, v);
  std::string text;
  if (Status s = Try([&] { text = body.dump(); }); !s.ok()) return s;  // invalid UTF-8 in a field
  return impl_->JsonBody(impl_->http.Post(path, h, text, "application/json"));
}

Result<Json> ApiClient::Upload(const std::string& path, const std::string& file_field,
                               const std::string& file_path,
                               const std::vector<std::pair<std::string, std::string>>& fields) {
  if (Status s = impl_->Check(); !s.ok()) return s;
  std::string content;
  if (Status s = Try([&] { content = ReadFile(file_path); }); !s.ok()) return s;
  httplib::MultipartFormDataItems items;
  for (const auto& [k, v] : fields) items.push_back({k, v, "", ""});
  items.push_back({file_field, content, std::filesystem::path(file_path).filename().string(),
                   "application/octet-stream"});
  return impl_->JsonBody(impl_->http.Post(path, impl_->Headers(), items));
}

std::string FileIdOrUpload(ApiClient& api, const std::string& arg, std::FILE* info) {
  if (arg.rfind("file-", 0) == 0 || !std::filesystem::exists(arg)) return arg;
  auto f = api.Upload("/v1/files", "file", arg, {{"purpose", "fine-tune"}});
  if (!f.ok()) throw Error(f.status());
  const std::string id = f.value().value("id", "");
  std::fprintf(info, "uploaded %s as %s\n", arg.c_str(), id.c_str());
  return id;
}

}  // namespace burst
