// OpenAI's Batch API (/v1/batches: create, retrieve, list, cancel): jobs of
// kind "batch" (api/batch_request.h; the worker's side is
// worker/batch_run.h).
#include "api/batch_request.h"
#include "api/context.h"
#include "core/fs.h"
#include "core/ids.h"
#include "store/keys.h"

namespace burst {
namespace {

Json Render(ApiContext& ctx, const JobRecord& job) {
  return BatchJson(job, ctx.md.JobUsage(job.id).ValueOrThrow());
}

void Create(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  auto body = ReadBody(req, res);
  if (!body) return;
  const std::string idem = req.header("idempotency-key");
  if (!CheckText(idem, "idempotency_key", 256, res)) return;
  JobRequestContext jctx = ctx.JobContext(key.org_id);
  ParsedBatch parsed;
  Status parse = Try([&] {
    parsed = ParseBatchRequest(*body, jctx);
    const std::string shipped = ctx.ShippedModel(parsed.job.spec.value("base_model", ""));
    if (!shipped.empty()) parsed.job.spec["base_model_store"] = shipped;
  });
  if (!parse.ok()) return SendStatus(res, parse);
  const int64_t bytes = static_cast<int64_t>(parsed.requests.size());
  if (Status quota = ctx.CheckStorage(key.org_id, bytes, "input_file_id"); !quota.ok()) {
    return SendStatus(res, quota);
  }
  JobRecord job;
  job.id = NewId("batch");
  job.org_id = key.org_id;
  job.idempotency_key = idem;
  job.request_sha256 = Sha256Hex(body->dump());
  job.spec = std::move(parsed.job.spec);
  job.total_steps = parsed.job.total_steps;
  // The checked requests go first: a batch that exists can always read
  // them (an object left by a create that failed after is unreachable).
  const std::string key_requests = BatchRequestsKey(JobPrefix(key.org_id, job.id));
  job.spec["batch"]["requests_key"] = key_requests;
  if (Status put = ctx.store.Put(key_requests, parsed.requests); !put.ok()) return SendStatus(res, put);
  bool created = false;
  auto rec = ctx.rt.Submit(std::move(job), &created);
  if (!rec.ok()) return SendStatus(res, rec.status());
  if (rec.value().kind() != TaskKind::kBatch) {  // an Idempotency-Key of another kind of job
    return SendStatus(res,
                      Status(Code::kInvalidArgument, "Idempotency-Key was already used by " + rec.value().id,
                             "idempotency_key"));
  }
  SendJson(res, 200, created ? BatchJson(rec.value(), UsageSum{}) : Render(ctx, rec.value()));
}

void List(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  int64_t limit = 0;
  if (!ReadLimit(req, res, &limit)) return;
  auto jobs = ctx.md.ListJobs(key.org_id, req.param("after"), limit + 1, TaskKind::kBatch);
  if (!jobs.ok()) return SendStatus(res, jobs.status());
  Json page = Page(jobs.value(), limit, [&](const JobRecord& j) { return Render(ctx, j); });
  const Json& data = page["data"];
  page["first_id"] = data.empty() ? Json() : data.front()["id"];
  page["last_id"] = data.empty() ? Json() : data.back()["id"];
  SendJson(res, 200, page);
}

}  // namespace

void AddBatchRoutes(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  routes.Post("/v1/batches", [c](const ApiKey& k, const auto& q, auto& r) { Create(*c, k, q, r); });
  routes.Get("/v1/batches", [c](const ApiKey& k, const auto& q, auto& r) { List(*c, k, q, r); });
  routes.Get("/v1/batches/{}", [c](const ApiKey& k, const auto& q, auto& r) {
    if (auto job = OwnJobOfKind(*c, k, q, r, TaskKind::kBatch)) SendJson(r, 200, Render(*c, *job));
  });
  routes.Post("/v1/batches/{}/cancel", [c](const ApiKey& k, const auto& q, auto& r) {
    if (!OwnJobOfKind(*c, k, q, r, TaskKind::kBatch)) return;
    auto job = c->rt.Cancel(k.org_id, q.matches[1]);
    if (!job.ok()) return SendStatus(r, job.status());
    SendJson(r, 200, Render(*c, job.value()));
  });
}

}  // namespace burst
