// Metering: a worker's life is cut into usage segments (startup, training,
// evaluation, sampling, deployment, idle) that telescope, so they add up to
// its observed lifetime; serverless work adds token charges. A segment is
// closed in memory (Worker::closed) and written with the worker's record in
// one transaction by SaveWorker. A save that fails keeps the segments and is
// retried every tick (RetryUnsaved), also for a worker that has exited
// meanwhile, so the usage ledger never loses a closed segment to a failed
// write; every failure is logged on stderr.
#include <cstdio>

#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"

namespace burst {
using namespace runtime_internal;

Status Runtime::SaveWorker(Worker& w) {
  Status s = md_.PutWorker(w.rec, w.closed);
  if (s.ok()) {
    // What the ledger now holds, for the operator's metrics.
    Metrics& m = Metrics::Default();
    for (const UsageRecord& u : w.closed) {
      const MetricLabels labels = {{"line", std::string(ToString(u.line))},
                                   {"scope", std::string(ToString(u.scope))}};
      m.Add("burst_billed_seconds_total", labels, static_cast<double>(u.end_ms - u.start_ms) / 1000.0);
      m.Add("burst_billed_tokens_total", labels, static_cast<double>(u.tokens));
      m.Add("burst_billed_dollars_total", labels, u.cost);
    }
    if (w.save_failures > 0) {
      std::fprintf(stderr,
                   "burst serve: worker %s's record and %zu usage segments written after %lld failed tries\n",
                   w.rec.id.c_str(), w.closed.size(), static_cast<long long>(w.save_failures));
    }
    w.closed.clear();
    w.save_failures = 0;
    return s;
  }
  // Logged at the first failure and then now and again: a database that
  // stays broken must not flood the log at every tick.
  if (++w.save_failures == 1 || w.save_failures % 100 == 0) {
    double cost = 0;
    for (const UsageRecord& u : w.closed) cost += u.cost;
    char what[400];
    std::snprintf(
        what, sizeof what,
        "cannot write worker %s (state %s) with the %zu usage segments it closed ($%.6f), try %lld; "
        "kept in memory and written again at the next tick",
        w.rec.id.c_str(), std::string(ToString(w.rec.state)).c_str(), w.closed.size(), cost,
        static_cast<long long>(w.save_failures));
    LogFailure(what, s);
  }
  return s;
}

void Runtime::RetryUnsaved() {
  for (auto& [id, w] : workers_) {
    if (w.save_failures > 0) SaveWorker(w).IgnoreError(kKept);
  }
  for (auto it = unsaved_exited_.begin(); it != unsaved_exited_.end();) {
    if (SaveWorker(it->second).ok()) {
      it = unsaved_exited_.erase(it);
    } else {
      ++it;
    }
  }
}

void Runtime::RemoveWorker(std::map<std::string, Worker>::iterator it) {
  tokens_.Remove(it->second.rec.token_sha256);
  if (it->second.save_failures > 0) unsaved_exited_[it->first] = std::move(it->second);
  workers_.erase(it);
}

void Runtime::SwitchSegment(Worker& w, int64_t at_ms, std::optional<UsageLine> line, const std::string& org,
                            const std::string& job, std::optional<BillingScope> scope,
                            const std::string& run) {
  WorkerRecord& r = w.rec;
  const bool idle = line == UsageLine::kIdle;
  // A replica's whole life is its deployment's: it is never idle on its own.
  if (idle && !r.deployment.empty()) return;
  if (r.seg_line && at_ms > r.seg_start_ms) {
    // Serverless work's worker time is recorded, and billed as tokens instead.
    const double cost =
        r.seg_scope == BillingScope::kServerless
            ? 0.0
            : static_cast<double>(at_ms - r.seg_start_ms) / 1000.0 * opt_.price_per_slot_second;
    UsageRecord u{r.id,  r.seg_org, r.seg_job,   *r.seg_line, r.seg_start_ms,
                  at_ms, cost,      r.seg_scope, 0,           r.seg_run};
    w.closed.push_back(u);
  }
  const bool work = line && IsWork(*line);
  if (work && scope) r.last_scope = *scope;
  if (work) r.last_run = run;
  r.seg_line = line;
  r.seg_org = org;
  r.seg_job = job;
  r.seg_scope = scope.value_or(r.last_scope);
  // Idle time belongs to the run the worker served last.
  r.seg_run = idle && run.empty() ? r.last_run : run;
  r.seg_start_ms = at_ms;
}

void Runtime::ChargeTokens(Worker& w, int64_t at_ms, UsageLine line, const std::string& org,
                           const std::string& job, const std::string& run, int64_t tokens, double cost) {
  if (tokens <= 0) return;
  w.closed.push_back(
      UsageRecord{"", org, job, line, at_ms, at_ms, cost, BillingScope::kServerless, tokens, run});
}

void Runtime::BackToIdle(Worker& w, int64_t now, const std::string& org) {
  if (w.rec.state == WorkerState::kBusy) {  // a worker told to stop meanwhile stays stopping
    w.rec.state = WorkerState::kIdle;
    w.rec.since_ms = now;
    w.idle_since_ms = now;
  }
  w.rec.job_id.clear();
  SwitchSegment(w, now, UsageLine::kIdle, org, "");
}

}  // namespace burst
