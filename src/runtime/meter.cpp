#include "runtime/meter.h"

#include <cstdio>

#include "core/metrics.h"
#include "runtime/runtime_internal.h"

namespace burst {
using runtime_internal::LogFailure;

double Meter::PricePerSecond(const WorkerRecord& r) const {
  if (auto price = DevicePricePerSecond(ClaimOf(r), price_per_slot_second_, price_per_gpu_second_))
    return *price;
  // burst serve gives every type of its pool a price; a worker adopted
  // after a restart with another pool may hold one it has not.
  LogFailure("no price for GPU type " + r.device + " (worker " + r.id + "): its time is billed at 0",
             Status(Code::kFailedPrecondition, "give one with --price-per-hour " + r.device + "=..."));
  return 0;
}

void Meter::Switch(WorkerRecord& r, PendingUsage& usage, int64_t at_ms, std::optional<UsageLine> line,
                   const std::string& org, const std::string& job, std::optional<BillingScope> scope,
                   const std::string& run) const {
  const bool idle = line == UsageLine::kIdle;
  if (idle && !r.deployment.empty()) return;
  if (r.seg_line && at_ms > r.seg_start_ms) {
    const double cost = r.seg_scope == BillingScope::kServerless
                            ? 0.0
                            : static_cast<double>(at_ms - r.seg_start_ms) / 1000.0 * PricePerSecond(r);
    usage.closed.push_back(UsageRecord{r.id, r.seg_org, r.seg_job, *r.seg_line, r.seg_start_ms, at_ms, cost,
                                       r.seg_scope, 0, r.seg_run, r.device, ClaimOf(r).count});
  }
  const bool work = line && IsWork(*line);
  if (work && scope) r.last_scope = *scope;
  if (work) r.last_run = run;
  r.seg_line = line;
  r.seg_org = org;
  r.seg_job = job;
  r.seg_scope = scope.value_or(r.last_scope);
  r.seg_run = idle && run.empty() ? r.last_run : run;
  r.seg_start_ms = at_ms;
}

void Meter::Charge(PendingUsage& usage, int64_t at_ms, UsageLine line, const std::string& org,
                   const std::string& job, const std::string& run, int64_t tokens, double cost) {
  if (tokens <= 0) return;
  usage.closed.push_back(
      UsageRecord{"", org, job, line, at_ms, at_ms, cost, BillingScope::kServerless, tokens, run, "cpu", 1});
}

Status Meter::Save(const WorkerRecord& r, PendingUsage& usage) {
  Status s = md_.PutWorker(r, usage.closed);
  if (s.ok()) {
    // What the ledger now holds, for the operator's metrics.
    Metrics& m = Metrics::Default();
    for (const UsageRecord& u : usage.closed) {
      const MetricLabels labels = {{"line", std::string(ToString(u.line))},
                                   {"scope", std::string(ToString(u.scope))},
                                   {"device", u.device}};
      m.Add("burst_billed_seconds_total", labels, static_cast<double>(u.end_ms - u.start_ms) / 1000.0);
      m.Add("burst_billed_tokens_total", labels, static_cast<double>(u.tokens));
      m.Add("burst_billed_dollars_total", labels, u.cost);
    }
    if (usage.save_failures > 0) {
      std::fprintf(stderr,
                   "burst serve: worker %s's record and %zu usage segments written after %lld failed tries\n",
                   r.id.c_str(), usage.closed.size(), static_cast<long long>(usage.save_failures));
    }
    usage.closed.clear();
    usage.save_failures = 0;
    return s;
  }
  // Logged at the first failure and then now and again: a database that
  // stays broken must not flood the log at every tick.
  if (++usage.save_failures == 1 || usage.save_failures % 100 == 0) {
    double cost = 0;
    for (const UsageRecord& u : usage.closed) cost += u.cost;
    char what[400];
    std::snprintf(
        what, sizeof what,
        "cannot write worker %s (state %s) with the %zu usage segments it closed ($%.6f), try %lld; "
        "kept in memory and written again at the next tick",
        r.id.c_str(), std::string(ToString(r.state)).c_str(), usage.closed.size(), cost,
        static_cast<long long>(usage.save_failures));
    LogFailure(what, s);
  }
  return s;
}

void Meter::SaveExited(const WorkerRecord& r, PendingUsage usage) {
  if (!Save(r, usage).ok()) KeepExited(r, std::move(usage));
}

void Meter::KeepExited(const WorkerRecord& r, PendingUsage usage) {
  std::lock_guard<std::mutex> lock(mu_);
  exited_[r.id] = Exited{r, std::move(usage)};
}

void Meter::RetryExited() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = exited_.begin(); it != exited_.end();) {
    if (Save(it->second.rec, it->second.usage).ok()) {
      it = exited_.erase(it);
    } else {
      ++it;
    }
  }
}

Meter::Behind Meter::ExitedBehind() const {
  std::lock_guard<std::mutex> lock(mu_);
  Behind b;
  b.records = exited_.size();
  for (const auto& [id, e] : exited_) b.segments += e.usage.closed.size();
  return b;
}

}  // namespace burst
