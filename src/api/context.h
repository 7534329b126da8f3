// ApiContext and Routes: what every route file of the API shares.
//
// ApiContext holds the database, the object store, the scheduler and the
// server's options. Routes registers a resource's routes with the router,
// each with its admission check (an API key for /v1, a worker token for
// /internal/v1), its body limit, and one catch that turns an escaped
// exception into the error shape of respond.h. The route files
// (routes_*.cpp) each add one resource's routes.
//
// Thread-safety: handlers run on many threads at once; Metadata, ObjectStore
// and Runtime are thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "api/http/router.h"
#include "api/job_request.h"
#include "api/respond.h"
#include "api/server.h"
#include "api/storage_quota.h"
#include "core/key_rates.h"
#include "runtime/loops.h"
#include "store/model_store.h"

namespace burst {

struct ApiContext {
  ApiContext(Metadata& m, ObjectStore& s, Runtime& r, const ServerOptions& o)
      : md(m), store(s), rt(r), opt(o) {}

  Metadata& md;
  ObjectStore& store;
  Runtime& rt;
  const ServerOptions& opt;

  // Set when opt.ship_models: publishes base models to the store.
  std::unique_ptr<ModelPublisher> publisher;
  // Training loops as a service (routes_tinker.cpp).
  std::unique_ptr<Loops> loops;
  // Each API key's request rate (null: no limit; ServerOptions::key_max_rps).
  std::unique_ptr<KeyRates> key_rates;
  // Each organisation's stored bytes against opt.max_storage_per_org.
  std::unique_ptr<StorageQuota> quota;
  // kResourceExhausted (org_cap) when the organisation's storage is over its
  // quota with `more` bytes added (routes check it before they store).
  Status CheckStorage(const std::string& org_id, int64_t more, const std::string& param) {
    return quota->Check(org_id, more, param, NowMs());
  }

  // The store prefix workers fetch base model `dir` from (published first
  // when the store lacks it), or "" when workers read the folder itself.
  // Throws burst::Error naming "model" (the store's failure, or a folder
  // that cannot be shipped).
  std::string ShippedModel(const std::string& dir);

  // What a job request of `org` is checked against.
  JobRequestContext JobContext(const std::string& org) {
    return JobRequestContext{
        org, &md, opt.model_roots, rt.options().threads_per_slot, &store, rt.options().slots, rt.Pool()};
  }

  // The URL clients reach this server at (ApiServer::url(), no trailing
  // '/'), which links it hands out start with; set by Bind, before any
  // request is served.
  std::string public_url;

  // Time as the scheduler sees it (a fake clock in tests).
  int64_t NowMs() { return rt.clock().NowMs(); }
  int64_t NowS() { return NowMs() / 1000; }

  // A standby control plane (another one holds the leader lease) answers
  // every route but /v1/health with 503 "standby", naming the active one.
  std::atomic<bool> standby{false};
  std::mutex leader_mu;
  std::string leader_url;  // GUARDED_BY(leader_mu)
  // The 503 a standby answers, or OK when this control plane is active.
  Status StandbyStatus() {
    if (!standby.load()) return Status();
    std::lock_guard<std::mutex> lock(leader_mu);
    return Status(Code::kUnavailable,
                  "this control plane is on standby; the active one is at " +
                      (leader_url.empty() ? std::string("(not known yet)") : leader_url),
                  "", "standby");
  }
};

class Routes {
 public:
  using KeyHandler = std::function<void(const ApiKey&, const http::Request&, http::Response&)>;
  using WorkerHandler =
      std::function<void(const std::string& worker_id, const http::Request&, http::Response&)>;

  Routes(ApiContext& ctx, http::Router& router) : ctx_(ctx), router_(router) {}

  // Routes for API users ("Authorization: Bearer <API key>"). Bodies: JSON
  // up to kMaxJsonBody unless max_body says more; GET and DELETE take none
  // worth reading.
  void Get(const std::string& pattern, KeyHandler handler);
  void Post(const std::string& pattern, KeyHandler handler, int64_t max_body = kMaxJsonBody);
  void Delete(const std::string& pattern, KeyHandler handler);
  void Put(const std::string& pattern, KeyHandler handler);  // JSON bodies up to kMaxJsonBody
  // A POST whose body goes to a temporary file (Request::body_file), not to
  // memory: uploads.
  void Upload(const std::string& pattern, KeyHandler handler, int64_t max_body);
  // The workers' protocol (a worker's token).
  void Internal(const std::string& pattern, WorkerHandler handler);
  // Without credentials (health).
  void Public(const std::string& method, const std::string& pattern, const http::Handler& handler);

 private:
  void AddKeyRoute(const std::string& method, const std::string& pattern, int64_t max_body,
                   KeyHandler handler, bool spool = false);
  ApiContext& ctx_;
  http::Router& router_;
};

// The caller's job named in the path (req.matches[1]), of `kind` when one
// is given; nullopt after answering 404 (another organisation's or kind's).
std::optional<JobRecord> OwnJobOfKind(ApiContext& ctx, const ApiKey& key, const http::Request& req,
                                      http::Response& res, std::optional<TaskKind> kind);

void AddFileRoutes(ApiContext& ctx, Routes& routes);
void AddJobRoutes(ApiContext& ctx, Routes& routes);    // jobs, evals, estimate
void AddBatchRoutes(ApiContext& ctx, Routes& routes);  // OpenAI's Batch API
void AddSweepRoutes(ApiContext& ctx, Routes& routes);
void AddDeploymentRoutes(ApiContext& ctx, Routes& routes);
void AddSamplingRoutes(ApiContext& ctx, Routes& routes);  // completions, chat completions
void AddAccountRoutes(ApiContext& ctx, Routes& routes);   // workers, usage, prices, models
void AddInternalRoutes(ApiContext& ctx, Routes& routes);  // the workers' protocol
void AddTinkerRoutes(ApiContext& ctx, Routes& routes);  // training loops (/api/v1, the tinker SDK's protocol)
void AddTinkerRestRoutes(ApiContext& ctx, Routes& routes);  // their training runs and checkpoints
void AddTinkerRefusedRoutes(Routes& routes);  // the SDK's routes Burst does not serve, refused by name
void AddTokenizeRoutes(ApiContext& ctx,
                       Routes& routes);  // a model's tokenizer (/v1/tokenize, /v1/detokenize)

}  // namespace burst
