#include "cli/api_client.h"

#include <httplib.h>

#include <CLI/CLI.hpp>
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
      return Status(Code::kUnavailable, "cannot reach " + target.url + " (" + httplib::to_string(r.error()) +
                                            "); is `burst serve` running there?",
                    "url");
    }
    if (r->status >= 400) {
      Json j = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("error") && j["error"].is_object()) return StatusFromJson(j["error"], r->status);
      // Not Burst's error shape (a proxy's page, say): the HTTP status decides.
      const Status s = StatusFromJson(Json(), r->status);
      return Status(s.code(), "HTTP " + std::to_string(r->status) + " from " + target.url);
    }
    return r->body;
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
