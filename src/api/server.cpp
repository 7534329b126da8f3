#include "api/server.h"

#include <httplib.h>

#include "core/fs.h"
#include "core/ids.h"
#include "core/json.h"
#include "train/data.h"

namespace burst {
namespace {

int HttpStatus(Code code) {
  switch (code) {
    case Code::kInvalidArgument: return 400;
    case Code::kNotFound: return 404;
    case Code::kAlreadyExists: return 409;
    case Code::kFailedPrecondition: return 409;
    case Code::kResourceExhausted: return 429;
    case Code::kUnavailable: return 503;
    case Code::kUnimplemented: return 501;
    default: return 500;
  }
}

void SendJson(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void SendError(httplib::Response& res, int status, const std::string& code, const std::string& message,
               const std::string& param = "") {
  SendJson(res, status,
           {{"error", {{"code", code}, {"message", message}, {"param", param.empty() ? Json() : Json(param)}}}});
}

void SendStatus(httplib::Response& res, const Status& s) {
  SendError(res, HttpStatus(s.code()), CodeName(s.code()), s.message(), s.param());
}

Json FileJson(const FileRecord& f) {
  return {{"id", f.id},           {"object", "file"},         {"bytes", f.bytes},
          {"created_at", f.created_at}, {"filename", f.filename}, {"purpose", f.purpose},
          {"status", "processed"}, {"sha256", f.sha256},        {"format", f.format},
          {"examples", f.examples}};
}

}  // namespace

struct ApiServer::Impl {
  Metadata& md;
  ObjectStore& store;
  ServerOptions opt;
  httplib::Server http;
  int bound_port = -1;

  Impl(Metadata& m, ObjectStore& s, ServerOptions o) : md(m), store(s), opt(std::move(o)) {}

  // The caller's API key, or nullopt after answering 401.
  std::optional<ApiKey> Auth(const httplib::Request& req, httplib::Response& res) {
    std::string h = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    if (h.rfind(bearer, 0) != 0) {
      SendError(res, 401, "unauthenticated", "missing \"Authorization: Bearer <API key>\" header",
                "authorization");
      return std::nullopt;
    }
    auto key = md.Authenticate(h.substr(bearer.size()));
    if (!key.ok()) {
      if (key.status().code() == Code::kNotFound) {
        SendError(res, 401, "unauthenticated", "invalid or revoked API key", "authorization");
      } else {
        SendStatus(res, key.status());
      }
      return std::nullopt;
    }
    return key.value();
  }

  void UploadFile(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    if (!req.is_multipart_form_data()) {
      return SendError(res, 400, "invalid_argument", "upload a file as multipart/form-data", "file");
    }
    if (!req.has_file("file")) return SendError(res, 400, "invalid_argument", "missing the \"file\" part", "file");
    const std::string purpose = req.has_file("purpose") ? req.get_file_value("purpose").content : "";
    if (purpose != "fine-tune") {
      return SendError(res, 400, "invalid_argument",
                       "purpose must be \"fine-tune\" (got \"" + purpose + "\")", "purpose");
    }
    const httplib::MultipartFormData& part = req.get_file_value("file");
    std::string filename = part.filename.empty() ? "upload.jsonl" : part.filename;
    DataFileCheck check;
    Status s = Try([&] { check = CheckDataBytes(part.content, filename); });
    if (!s.ok()) return SendStatus(res, s);

    FileRecord f;
    f.id = NewId("file");
    f.org_id = key->org_id;
    f.filename = filename;
    f.purpose = purpose;
    f.bytes = static_cast<int64_t>(part.content.size());
    f.sha256 = check.sha256;
    f.format = check.format;
    f.examples = check.examples;
    f.object_key = "orgs/" + key->org_id + "/files/" + f.id;
    if (Status put = store.Put(f.object_key, part.content); !put.ok()) return SendStatus(res, put);
    if (Status rec = md.CreateFile(f); !rec.ok()) {
      store.Delete(f.object_key);  // nothing half-made
      return SendStatus(res, rec);
    }
    SendJson(res, 200, FileJson(f));
  }

  void ListFiles(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    int64_t limit = 100;
    if (req.has_param("limit")) {
      const std::string v = req.get_param_value("limit");
      char* end = nullptr;
      limit = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || limit < 1 || limit > 10000) {
        return SendError(res, 400, "invalid_argument", "limit must be an integer in 1..10000", "limit");
      }
    }
    const std::string after = req.has_param("after") ? req.get_param_value("after") : "";
    auto files = md.ListFiles(key->org_id, after, limit + 1);
    if (!files.ok()) return SendStatus(res, files.status());
    Json data = Json::array();
    const bool more = static_cast<int64_t>(files.value().size()) > limit;
    for (size_t i = 0; i < files.value().size() && static_cast<int64_t>(i) < limit; ++i)
      data.push_back(FileJson(files.value()[i]));
    SendJson(res, 200, {{"object", "list"}, {"data", data}, {"has_more", more}});
  }

  void GetFile(const httplib::Request& req, httplib::Response& res, bool content) {
    auto key = Auth(req, res);
    if (!key) return;
    auto f = md.GetFile(key->org_id, req.matches[1]);
    if (!f.ok()) return SendStatus(res, f.status());
    if (!content) return SendJson(res, 200, FileJson(f.value()));
    auto bytes = store.Get(f.value().object_key);
    if (!bytes.ok()) return SendStatus(res, bytes.status());
    res.status = 200;
    res.set_content(bytes.value(), "application/octet-stream");
  }

  void DeleteFile(const httplib::Request& req, httplib::Response& res) {
    auto key = Auth(req, res);
    if (!key) return;
    auto f = md.GetFile(key->org_id, req.matches[1]);
    if (!f.ok()) return SendStatus(res, f.status());
    // The record goes first: a file is gone once nothing refers to it; bytes
    // that outlive a crash here are unreachable and harmless.
    if (Status s = md.DeleteFile(key->org_id, f.value().id); !s.ok()) return SendStatus(res, s);
    store.Delete(f.value().object_key);
    SendJson(res, 200, {{"id", f.value().id}, {"object", "file"}, {"deleted", true}});
  }

  void Routes() {
    const int threads = opt.threads;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    http.set_payload_max_length(static_cast<size_t>(opt.max_body_bytes));
    // httplib's default also sets SO_REUSEPORT, which lets a second server
    // bind the same port and silently take half the requests (a second
    // `burst serve` with another --data would then answer for the first).
    // SO_REUSEADDR alone keeps quick restarts possible and makes a busy port
    // an error.
    http.set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    http.Get("/v1/health", [](const httplib::Request&, httplib::Response& res) {
      SendJson(res, 200, {{"status", "ok"}});
    });
    http.Post("/v1/files", [this](const auto& req, auto& res) { UploadFile(req, res); });
    http.Get("/v1/files", [this](const auto& req, auto& res) { ListFiles(req, res); });
    http.Get(R"(/v1/files/([A-Za-z0-9_-]+))", [this](const auto& req, auto& res) { GetFile(req, res, false); });
    http.Get(R"(/v1/files/([A-Za-z0-9_-]+)/content)",
             [this](const auto& req, auto& res) { GetFile(req, res, true); });
    http.Delete(R"(/v1/files/([A-Za-z0-9_-]+))", [this](const auto& req, auto& res) { DeleteFile(req, res); });
    // Errors httplib answers itself (unknown route, body too large) get the
    // same JSON shape as ours.
    const int64_t max_body = opt.max_body_bytes;
    http.set_error_handler([max_body](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413) {
        SendError(res, 413, "resource_exhausted",
                  "request body over the limit of " + std::to_string(max_body) + " bytes");
      } else if (res.status == 404) {
        SendError(res, 404, "not_found", "no route " + req.method + " " + req.path);
      } else {
        SendError(res, res.status, "http_" + std::to_string(res.status), "request failed");
      }
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      Status s;
      try {
        std::rethrow_exception(ep);
      } catch (...) {
        s = CurrentExceptionToStatus();
      }
      SendStatus(res, s);
    });
  }
};

ApiServer::ApiServer(Metadata& metadata, ObjectStore& store, ServerOptions options)
    : impl_(std::make_unique<Impl>(metadata, store, std::move(options))) {
  impl_->Routes();
}

ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Bind() {
  int port = impl_->opt.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(impl_->opt.host);
    if (port < 0) port = -1;
  } else if (!impl_->http.bind_to_port(impl_->opt.host, port)) {
    port = -1;
  }
  if (port < 0) {
    return Status(Code::kUnavailable,
                  "cannot listen on " + impl_->opt.host + ":" + std::to_string(impl_->opt.port) +
                      " (address in use or not available)",
                  "listen");
  }
  impl_->bound_port = port;
  return Status();
}

int ApiServer::port() const { return impl_->bound_port; }

void ApiServer::Serve() { impl_->http.listen_after_bind(); }

void ApiServer::Stop() {
  if (impl_ && impl_->http.is_running()) impl_->http.stop();
}

}  // namespace burst
