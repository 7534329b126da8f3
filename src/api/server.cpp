#include "api/server.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>

#include "api/checkpoint_download.h"
#include "api/context.h"
#include "api/dashboard.h"
#include "api/models.h"
#include "api/observe.h"
#include "core/metrics.h"

namespace burst {
namespace {

// Errors the HTTP layer answers itself, in the API's error shape.
void RenderHttpError(http::Response& res, int status, const std::string& message) {
  Code code = Code::kInvalidArgument;
  std::string param, reason;
  switch (status) {
    case 429:
      code = Code::kResourceExhausted;
      reason = "rate_limit";
      break;  // a share of the server, for now
    case 404:
      code = Code::kNotFound;
      break;
    case 408:
      code = Code::kUnavailable;
      break;
    case 413:
      code = Code::kResourceExhausted;
      param = "body";
      break;
    case 431:
      code = Code::kResourceExhausted;
      param = "headers";
      break;
    case 501:
      code = Code::kUnimplemented;
      break;
    case 503:
      code = Code::kUnavailable;
      break;
    case 500:
      code = Code::kInternal;
      break;
    default:
      break;
  }
  res.status = status;
  res.content_type = "application/json";
  res.body = DumpJson(ErrorJson(Status(code, message, param, reason)));
  if (status == 503 || status == 429) res.set_header("Retry-After", "1");
}

// Runs a handler; an exception that escapes it is answered like a Status.
template <typename Fn>
void Guarded(http::Response& res, Fn&& fn) {
  Status s = Try(fn);
  if (!s.ok()) {
    res = http::Response();
    SendStatus(res, s);
  }
}

}  // namespace

void Routes::AddKeyRoute(const std::string& method, const std::string& pattern, int64_t max_body,
                         KeyHandler handler, bool spool) {
  ApiContext* ctx = &ctx_;
  auto admit = [ctx](http::Request& req, http::Response& res) {
    if (Status st = ctx->StandbyStatus(); !st.ok()) {
      SendStatus(res, st);
      return false;
    }
    std::string token = BearerToken(req);
    // The tinker SDK sends "X-API-Key: tml-<key>" (it refuses keys without
    // that prefix on the client side): the same Burst API key.
    if (token.empty()) token = req.header("x-api-key");
    if (token.rfind("tml-", 0) == 0) token = token.substr(4);
    if (token.empty()) {
      SendStatus(
          res, Status(Code::kUnauthenticated,
                      "missing \"Authorization: Bearer <API key>\" (or \"X-API-Key: tml-<API key>\") header",
                      "authorization"));
      return false;
    }
    auto key = ctx->md.Authenticate(token);
    if (!key.ok()) {
      SendStatus(res, key.status().code() == Code::kNotFound
                          ? Status(Code::kUnauthenticated, "invalid or revoked API key", "authorization")
                          : key.status());
      return false;
    }
    if (ctx->key_rates) {
      int retry_s = 1;
      if (Status st = ctx->key_rates->Admit(key.value().id, ctx->NowMs(), &retry_s); !st.ok()) {
        SendStatus(res, st);
        res.set_header("Retry-After", std::to_string(retry_s));
        return false;
      }
    }
    req.principal = std::move(key).value();
    return true;
  };
  // Each organisation's requests count against its own shares of threads
  // and bytes in flight (http_server.h).
  http::RouteOptions options;
  options.spool = spool;
  options.tenant = [](const http::Request& req) {
    return "org " + std::any_cast<const ApiKey&>(req.principal).org_id;
  };
  router_.Add(
      method, pattern, max_body, std::move(admit),
      [handler = std::move(handler)](http::Request& req, http::Response& res) {
        const ApiKey& key = std::any_cast<const ApiKey&>(req.principal);
        Guarded(res, [&] { handler(key, req, res); });
      },
      std::move(options));
}

void Routes::Get(const std::string& pattern, KeyHandler handler) {
  AddKeyRoute("GET", pattern, 64 << 10, std::move(handler));
}
void Routes::Post(const std::string& pattern, KeyHandler handler, int64_t max_body) {
  AddKeyRoute("POST", pattern, max_body, std::move(handler));
}
void Routes::Upload(const std::string& pattern, KeyHandler handler, int64_t max_body) {
  AddKeyRoute("POST", pattern, max_body, std::move(handler), /*spool=*/true);
}
void Routes::Delete(const std::string& pattern, KeyHandler handler) {
  AddKeyRoute("DELETE", pattern, 64 << 10, std::move(handler));
}
void Routes::Put(const std::string& pattern, KeyHandler handler) {
  AddKeyRoute("PUT", pattern, kMaxJsonBody, std::move(handler));
}

void Routes::Internal(const std::string& pattern, WorkerHandler handler) {
  ApiContext* ctx = &ctx_;
  auto admit = [ctx](http::Request& req, http::Response& res) {
    if (Status st = ctx->StandbyStatus(); !st.ok()) {
      SendStatus(res, st);
      return false;
    }
    const std::string token = BearerToken(req);
    auto id =
        token.empty() ? Result<std::string>(Status(Code::kNotFound, "")) : ctx->rt.AuthenticateWorker(token);
    if (!id.ok()) {
      SendStatus(res, Status(Code::kUnauthenticated, "invalid worker token", "authorization"));
      return false;
    }
    req.principal = std::move(id).value();
    return true;
  };
  // On a pool of their own: heartbeats and leases never wait behind API traffic.
  http::RouteOptions options;
  options.lane = http::Lane::kInternal;
  options.tenant = [](const http::Request& req) {
    return "worker " + std::any_cast<const std::string&>(req.principal);
  };
  router_.Add(
      "POST", pattern, kMaxJsonBody, std::move(admit),
      [handler = std::move(handler)](http::Request& req, http::Response& res) {
        const std::string& worker = std::any_cast<const std::string&>(req.principal);
        Guarded(res, [&] { handler(worker, req, res); });
      },
      std::move(options));
}

void Routes::Public(const std::string& method, const std::string& pattern, const http::Handler& handler) {
  router_.Add(method, pattern, 64 << 10, nullptr, [handler](http::Request& req, http::Response& res) {
    Guarded(res, [&] { handler(req, res); });
  });
}

struct ApiServer::Impl {
  ServerOptions opt;
  LoopJournal journal;  // before ctx: its loops write to it
  ApiContext ctx;
  std::unique_ptr<http::HttpServer> http;

  Impl(Metadata& md, ObjectStore& store, Runtime& rt, ServerOptions o)
      : opt(std::move(o)), journal(store), ctx(md, store, rt, opt) {
    if (opt.ship_models) ctx.publisher = std::make_unique<ModelPublisher>(store);
    ctx.loops = std::make_unique<Loops>(rt, opt.sample_wait_ms, opt.loops, &journal);
    ctx.quota = std::make_unique<StorageQuota>(store, opt.max_storage_per_org);
    if (opt.key_max_rps > 0)
      ctx.key_rates = std::make_unique<KeyRates>(opt.key_max_rps, std::max(1.0, 2 * opt.key_max_rps));
  }
};

ApiServer::ApiServer(Metadata& metadata, ObjectStore& store, Runtime& runtime, ServerOptions options)
    : impl_(std::make_unique<Impl>(metadata, store, runtime, std::move(options))) {
  http::Router router;
  Routes routes(impl_->ctx, router);
  ApiContext* ctx = &impl_->ctx;
  routes.Public("GET", "/v1/health", [ctx](http::Request&, http::Response& res) {
    std::lock_guard<std::mutex> lock(ctx->leader_mu);
    SendJson(res, 200,
             {{"status", "ok"},
              {"role", ctx->standby.load() ? "standby" : "active"},
              {"leader", ctx->leader_url.empty() ? Json() : Json(ctx->leader_url)}});
  });
  AddFileRoutes(impl_->ctx, routes);
  AddJobRoutes(impl_->ctx, routes);
  AddBatchRoutes(impl_->ctx, routes);
  AddSweepRoutes(impl_->ctx, routes);
  AddDeploymentRoutes(impl_->ctx, routes);
  AddSamplingRoutes(impl_->ctx, routes);
  AddAccountRoutes(impl_->ctx, routes);
  AddInternalRoutes(impl_->ctx, routes);
  AddTinkerRoutes(impl_->ctx, routes);
  AddTinkerRestRoutes(impl_->ctx, routes);
  AddTinkerRefusedRoutes(routes);
  AddTokenizeRoutes(impl_->ctx, routes);
  AddMetricsRoute(impl_->ctx, routes);
  AddCheckpointDownloadRoute(impl_->ctx, routes);
  AddDashboardRoutes(impl_->ctx, routes);
  // The server's own folders never reach API users by their paths.
  std::vector<std::pair<std::filesystem::path, std::string>> private_paths;
  for (const auto& root : impl_->opt.model_roots) private_paths.emplace_back(root, "models");
  if (!impl_->opt.data_dir.empty()) private_paths.emplace_back(impl_->opt.data_dir, "data");
  SetPrivatePaths(private_paths);
  impl_->http = std::make_unique<http::HttpServer>(std::move(router), impl_->opt.http, RenderHttpError);
  impl_->http->SetObserver(
      AccessObserver(impl_->opt.log_format == "json" ? LogFormat::kJson : LogFormat::kText));
}

std::string ApiContext::ShippedModel(const std::string& dir) {
  if (!publisher || dir.empty()) return "";
  auto prefix = publisher->Publish(dir);
  if (!prefix.ok()) {
    const Status& s = prefix.status();
    throw Error(Status(
        s.code(), "model: cannot ship the base model to workers through the store: " + s.message(), "model"));
  }
  return prefix.value();
}

void ApiServer::ShipModels(const std::atomic<bool>& stop) {
  if (!impl_->ctx.publisher) return;
  for (const ModelInfo& m : LoadCatalog(impl_->opt.model_roots)) {
    if (stop.load()) return;
    if (!m.error.empty()) continue;  // the catalog says what is wrong with it
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t before = impl_->ctx.publisher->uploads();
    auto prefix = impl_->ctx.publisher->Publish(m.path);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!prefix.ok()) {
      std::printf("burst serve: model %s cannot be shipped to workers: %s\n", m.id.c_str(),
                  prefix.status().ToString().c_str());
    } else {
      std::printf("burst serve: model %s %s %s (%.1f s)\n", m.id.c_str(),
                  impl_->ctx.publisher->uploads() > before ? "shipped to the store as" : "is in the store as",
                  prefix.value().c_str(), s);
    }
    std::fflush(stdout);
  }
}

ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Bind() {
  Status s = impl_->http->Bind(impl_->opt.host, impl_->opt.port);
  if (!s.ok()) return s;
  std::string url = impl_->opt.advertise_url;
  if (url.empty()) {
    std::string host = impl_->opt.host;
    if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
    if (host == "::") host = "::1";
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    url = "http://" + host + ":" + std::to_string(port());
  }
  while (!url.empty() && url.back() == '/') url.pop_back();
  impl_->ctx.public_url = url;
  return s;
}
int ApiServer::port() const { return impl_->http->port(); }
std::string ApiServer::url() const { return impl_->ctx.public_url; }
void ApiServer::Serve() { impl_->http->Serve(); }
void ApiServer::Stop() {
  if (impl_ && impl_->http) impl_->http->Stop();
}
http::ServerStats ApiServer::stats() const { return impl_->http->stats(); }

Result<int> ApiServer::RecoverLoops() { return impl_->ctx.loops->Recover(); }

void ApiServer::SetRole(bool active, const std::string& leader_url) {
  std::lock_guard<std::mutex> lock(impl_->ctx.leader_mu);
  impl_->ctx.leader_url = leader_url;
  impl_->ctx.standby = !active;
}

}  // namespace burst
