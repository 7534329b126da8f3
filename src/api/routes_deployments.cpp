// Deployments (/v1/deployments, api/deployments.h): named checkpoints served
// by replicas that scale from zero; the scheduling is Runtime's.
#include <thread>

#include "api/context.h"
#include "api/deployments.h"

namespace burst {
namespace {

Json Render(ApiContext& ctx, const DeploymentRecord& d) {
  const BillingScope scope = RecordedScope(d.target, "deployment " + d.id).ValueOrThrow();
  return DeploymentJson(d, ctx.rt.DeploymentState(d.id, scope), ctx.md.JobUsage(d.id).ValueOrThrow(),
                        ctx.NowMs());
}

void Create(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  auto body = ReadBody(req, res);
  if (!body) return;
  DeploymentRecord d;
  Status s = Try([&] {
    d = ParseDeploymentRequest(*body, key.org_id, ctx.md, ctx.opt.model_roots, ctx.rt.Pool(), &ctx.store);
    const std::string shipped = ctx.ShippedModel(d.target.value("base_model", ""));
    if (!shipped.empty()) d.target["base_model_store"] = shipped;
  });
  if (!s.ok()) return SendStatus(res, s);
  bool created = false;
  auto rec = ctx.rt.CreateDeployment(std::move(d), &created);
  if (!rec.ok()) return SendStatus(res, rec.status());
  SendJson(res, 200, Render(ctx, rec.value()));
}

void List(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  auto deps = ctx.md.ListDeployments(key.org_id, req.param("include") == "deleted");
  if (!deps.ok()) return SendStatus(res, deps.status());
  Json data = Json::array();
  for (const DeploymentRecord& d : deps.value()) data.push_back(Render(ctx, d));
  SendJson(res, 200, {{"object", "list"}, {"data", data}});
}

void Get(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  if (auto d = OrAnswer(ctx.md.GetDeployment(key.org_id, req.matches[1]), res))
    SendJson(res, 200, Render(ctx, *d));
}

// Stops every replica at once; answers when they have exited (or after
// 10 s), so the object it returns shows the final cost.
void Delete(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  auto d = ctx.rt.DeleteDeployment(key.org_id, req.matches[1]);
  if (!d.ok()) return SendStatus(res, d.status());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // Only the replicas are read here; the scope prices open time, not them.
  while (!ctx.rt.DeploymentState(d.value().id, BillingScope::kDedicated)["replicas"].empty() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto after = ctx.md.GetDeployment(key.org_id, d.value().id);
  SendJson(res, 200, Render(ctx, after.ok() ? after.value() : d.value()));
}

}  // namespace

void AddDeploymentRoutes(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  routes.Post("/v1/deployments", [c](const ApiKey& k, const auto& q, auto& r) { Create(*c, k, q, r); });
  routes.Get("/v1/deployments", [c](const ApiKey& k, const auto& q, auto& r) { List(*c, k, q, r); });
  routes.Get("/v1/deployments/{}", [c](const ApiKey& k, const auto& q, auto& r) { Get(*c, k, q, r); });
  routes.Delete("/v1/deployments/{}", [c](const ApiKey& k, const auto& q, auto& r) { Delete(*c, k, q, r); });
}

}  // namespace burst
