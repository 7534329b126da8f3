// Sweeps (/v1/sweeps, api/sweeps.h): one job body fanned out over a grid;
// each point is an ordinary job whose spec carries "sweep_id".
#include "api/context.h"
#include "api/job_request.h"
#include "api/sweeps.h"
#include "core/fs.h"
#include "core/ids.h"

namespace burst {
namespace {

void SendSweep(ApiContext& ctx, http::Response& res, const SweepRecord& sweep, const std::string& metric) {
  Json out;
  if (Status s = Try([&] { out = SweepJson(sweep, LoadSweepRuns(ctx.md, sweep), metric, ctx.NowMs()); });
      !s.ok()) {
    return SendStatus(res, s);
  }
  SendJson(res, 200, out);
}

void Create(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  auto body = ReadBody(req, res);
  if (!body) return;
  const std::string idem = req.header("idempotency-key");
  if (!CheckText(idem, "idempotency_key", 256, res)) return;
  const std::string metric = req.param("metric");
  // Every point is checked before anything is created.
  JobRequestContext jctx = ctx.JobContext(key.org_id);
  std::vector<JobRecord> jobs;
  SweepRecord sweep;
  Status s = Try([&] {
    CheckSweepMetric(metric);
    const std::vector<SweepPoint> points = ExpandSweep(*body);
    for (size_t i = 0; i < points.size(); ++i) {
      const Json point_body = PointJobBody((*body)["job"], points[i]);
      ParsedJob parsed;
      try {
        parsed = ParseJobRequest(point_body, jctx);
      } catch (const Error& e) {
        throw Error(SweepPointError(e.status(), points[i], i));
      }
      const std::string shipped = ctx.ShippedModel(parsed.spec.value("base_model", ""));
      if (!shipped.empty()) parsed.spec["base_model_store"] = shipped;
      JobRecord job;
      job.id = NewId("ftjob");
      job.org_id = key.org_id;
      job.request_sha256 = Sha256Hex(point_body.dump());
      job.spec = std::move(parsed.spec);
      job.total_steps = parsed.total_steps;
      sweep.runs.push_back({{"job_id", job.id}, {"overrides", points[i].overrides}});
      jobs.push_back(std::move(job));
    }
  });
  if (!s.ok()) return SendStatus(res, s);
  if (Status quota = ctx.CheckStorage(key.org_id, 0, "job"); !quota.ok()) return SendStatus(res, quota);
  sweep.id = NewId("sweep");
  sweep.org_id = key.org_id;
  sweep.idempotency_key = idem;
  sweep.request_sha256 = Sha256Hex(body->dump());
  sweep.request = *body;
  // The scheduler creates the sweep and its jobs with the organisation's cap
  // checked once, under its lock, for the whole sweep.
  bool created = false;
  auto rec = ctx.rt.SubmitSweep(std::move(sweep), std::move(jobs), &created);
  if (!rec.ok()) return SendStatus(res, rec.status());
  SendSweep(ctx, res, rec.value(), metric);
}

// The caller's sweep named in the path, or nullopt after answering.
std::optional<SweepRecord> OwnSweep(ApiContext& ctx, const ApiKey& key, const http::Request& req,
                                    http::Response& res) {
  return OrAnswer(ctx.md.GetSweep(key.org_id, req.matches[1]), res);
}

void Get(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  if (auto sweep = OwnSweep(ctx, key, req, res)) SendSweep(ctx, res, *sweep, req.param("metric"));
}

void List(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  int64_t limit = 0;
  if (!ReadLimit(req, res, &limit)) return;
  const std::string metric = req.param("metric");
  auto sweeps = ctx.md.ListSweeps(key.org_id, req.param("after"), limit + 1);
  if (!sweeps.ok()) return SendStatus(res, sweeps.status());
  const int64_t now_ms = ctx.NowMs();
  Json page;
  Status s = Try([&] {
    page = Page(sweeps.value(), limit, [&](const SweepRecord& sw) {
      return SweepJson(sw, LoadSweepRuns(ctx.md, sw), metric, now_ms);
    });
  });
  if (!s.ok()) return SendStatus(res, s);
  SendJson(res, 200, page);
}

void Cancel(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  auto sweep = OwnSweep(ctx, key, req, res);
  if (!sweep) return;
  std::vector<SweepRunView> runs;
  if (Status s = Try([&] { runs = LoadSweepRuns(ctx.md, *sweep); }); !s.ok()) return SendStatus(res, s);
  const JobStatus status = SweepStatus(*sweep, runs);
  if (status != JobStatus::kRunning) {
    return SendStatus(
        res, Status(Code::kFailedPrecondition,
                    "sweep " + sweep->id + " has already " + std::string(ToString(status)), "sweep_id"));
  }
  // Marked first, so that a repeated create request makes no more jobs.
  auto marked = ctx.md.CancelSweep(key.org_id, sweep->id, ctx.NowS());
  if (!marked.ok()) return SendStatus(res, marked.status());
  for (const SweepRunView& r : runs) {
    if (!r.job || IsTerminal(r.job->status)) continue;
    auto c = ctx.rt.Cancel(key.org_id, r.job_id);
    // A job that ended meanwhile keeps its outcome.
    if (!c.ok() && c.status().code() != Code::kFailedPrecondition) return SendStatus(res, c.status());
  }
  auto now = ctx.md.GetSweep(key.org_id, sweep->id);
  if (!now.ok()) return SendStatus(res, now.status());
  SendSweep(ctx, res, now.value(), req.param("metric"));
}

}  // namespace

void AddSweepRoutes(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  routes.Post("/v1/sweeps", [c](const ApiKey& k, const auto& q, auto& r) { Create(*c, k, q, r); });
  routes.Get("/v1/sweeps", [c](const ApiKey& k, const auto& q, auto& r) { List(*c, k, q, r); });
  routes.Get("/v1/sweeps/{}", [c](const ApiKey& k, const auto& q, auto& r) { Get(*c, k, q, r); });
  routes.Post("/v1/sweeps/{}/cancel", [c](const ApiKey& k, const auto& q, auto& r) { Cancel(*c, k, q, r); });
}

}  // namespace burst
