// Loops: sessions, samplers, download links, and the ends of a run's life
// (parked by its worker, deactivated by its owner).
#include <string>
#include <utility>
#include <vector>

#include "core/fs.h"
#include "core/ids.h"
#include "runtime/loops.h"
#include "runtime/loops_internal.h"
#include "store/keys.h"

namespace burst {

Result<std::string> Loops::CreateSession(const std::string& org_id, const Json&, const Json&) {
  std::unique_lock<std::mutex> lock(mu_);
  int live = 0;
  for (const auto& [id, sess] : sessions_) live += sess.first == org_id;
  if (live >= limits_.max_sessions_per_org) {
    Sweep(rt_.clock().NowMs());  // sessions long idle go first
    live = 0;
    for (const auto& [id, sess] : sessions_) live += sess.first == org_id;
  }
  if (live >= limits_.max_sessions_per_org) {
    return Status(Code::kResourceExhausted,
                  "your organisation has " + std::to_string(live) + " live sessions, its limit (" +
                      std::to_string(limits_.max_sessions_per_org) +
                      "); a session without a heartbeat for a day ends",
                  "max_loop_sessions", "org_cap");
  }
  const std::string id = NewId("sess");
  const int64_t now = rt_.clock().NowMs();
  sessions_[id] = {org_id, now};
  lock.unlock();
  if (Status s = Journal([&](LoopJournal& j) { return j.PutSession(org_id, id, now, ""); }, "session " + id);
      !s.ok()) {
    lock.lock();
    sessions_.erase(id);  // a failed request creates nothing
    return s;
  }
  return id;
}

Status Loops::Heartbeat(const std::string& org_id, const std::string& session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end() || it->second.first != org_id) {
    return Status(Code::kNotFound, "no session " + session_id, "session_id");
  }
  if (auto done = finished_.find(session_id); done != finished_.end()) {
    return Status(Code::kFailedPrecondition,
                  "session " + session_id + " was finished (" + done->second + "); start a new session",
                  "session_id");
  }
  it->second.second = rt_.clock().NowMs();
  return Status();
}

Status Loops::FinishSession(const std::string& org_id, const std::string& session_id,
                            const std::string& reason) {
  std::string first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end() || it->second.first != org_id) {
      return Status(Code::kNotFound, "no session " + session_id, "session_id");
    }
    first = finished_.emplace(session_id, reason).first->second;  // first wins
  }
  return Journal([&](LoopJournal& j) { return j.PutSession(org_id, session_id, rt_.clock().NowMs(), first); },
                 "session " + session_id);
}

std::vector<std::string> Loops::Sessions(const std::string& org_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, s] : sessions_)
    if (s.first == org_id) out.push_back(id);
  return out;
}

Result<std::pair<std::vector<std::string>, std::vector<std::string>>> Loops::SessionContents(
    const std::string& org_id, const std::string& session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = sessions_.find(session_id);
  if (s == sessions_.end() || s->second.first != org_id) {
    return Status(Code::kNotFound, "no session " + session_id, "session_id");
  }
  std::vector<std::string> runs, samplers;
  for (const auto& [id, r] : runs_)
    if (r.info.session_id == session_id) runs.push_back(id);
  for (const auto& [id, j] : samplers_)
    if (id.rfind(session_id + "-sample-", 0) == 0) samplers.push_back(id);
  return std::make_pair(runs, samplers);
}

Result<std::string> Loops::CreateSampler(const std::string& org_id, const std::string& session_id,
                                         int64_t seq, Json sampler) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::string id = session_id + "-sample-" + std::to_string(seq);
  if (!samplers_.count(id)) {
    int n = 0;
    for (const auto& [sid, j] : samplers_) n += j.value("org_id", "") == org_id;
    if (n >= limits_.max_samplers_per_org) {
      return Status(Code::kResourceExhausted,
                    "your organisation has " + std::to_string(n) + " sampling sessions, its limit (" +
                        std::to_string(limits_.max_samplers_per_org) + "); they end with their session",
                    "max_sampling_sessions", "org_cap");
    }
  }
  sampler["org_id"] = org_id;
  if (journal_) {
    lock.unlock();
    if (Status s =
            Journal([&](LoopJournal& j) { return j.PutSampler(org_id, id, sampler); }, "sampler " + id);
        !s.ok())
      return s;
    lock.lock();
  }
  samplers_[id] = std::move(sampler);
  return id;
}

Result<Json> Loops::Sampler(const std::string& org_id, const std::string& sampler_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = samplers_.find(sampler_id);
  if (it == samplers_.end() || it->second.value("org_id", "") != org_id) {
    return Status(Code::kNotFound, "no sampling session " + sampler_id, "sampling_session_id");
  }
  return it->second;
}

Status Loops::Parked(const std::string& run_id, const std::string& prefix, int64_t version) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return Status(Code::kNotFound, "no training run " + run_id, "run");
  RunState& r = it->second;
  if (prefix != LoopPrefix(r.info.org_id, run_id) + "snapshots/v" + std::to_string(version) + "/") {
    return Status(Code::kInvalidArgument, "a restore point of " + run_id + " lies in its snapshots/ folder",
                  "prefix");
  }
  if (version != r.version || r.busy) return Status();
  r.snapshot = {{"prefix", prefix}, {"version", version}};
  ClearReplay(r);
  if (!journal_) return Status();
  const std::string org_id = r.info.org_id;
  const Json snapshot = r.snapshot;
  lock.unlock();
  return Journal([&](LoopJournal& j) { return j.PutRestorePoint(org_id, run_id, snapshot, version); },
                 "restore point of " + run_id);
}

std::string Loops::IssueArchive(const std::string& prefix, const std::string& name, int64_t expires_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = rt_.clock().NowMs();
  for (auto it = archives_.begin(); it != archives_.end();) {  // forget expired links
    it = it->second.expires_ms <= now ? archives_.erase(it) : std::next(it);
  }
  std::string token = NewSecret("arch");
  archives_[Sha256Hex(token)] = {prefix, name, expires_ms};
  return token;
}

Result<std::pair<std::string, std::string>> Loops::Archive(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  // By the token's digest: the map's comparisons stop at the first byte
  // that differs, and on digests that byte tells a client nothing of any
  // token issued (as worker tokens and API keys are looked up).
  auto it = archives_.find(Sha256Hex(token));
  if (it == archives_.end() || it->second.expires_ms <= rt_.clock().NowMs()) {
    return Status(Code::kNotFound, "no such download link (they last 15 minutes; ask for a new one)",
                  "token");
  }
  return std::make_pair(it->second.prefix, it->second.name);
}

Status Loops::Deactivate(const std::string& org_id, const std::string& run_id) {
  LoopRunInfo record;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = runs_.find(run_id);
    if (it == runs_.end() || it->second.info.org_id != org_id) {
      return Status(Code::kNotFound, "no training run " + run_id, "model_id");
    }
    RunState& run = it->second;
    if (!run.info.active) return Status();
    run.info.active = false;
    run.parked = true;
    // Requests waiting for their turn fail; the one on a worker (busy) finishes.
    for (auto w = run.by_seq.lower_bound(run.next_seq); w != run.by_seq.end(); w = run.by_seq.erase(w)) {
      LoopFuture& f = *w->second;
      const int64_t bytes = PayloadBytes(f.op);
      run.waiting_bytes -= bytes;
      Release(org_id, bytes);
      f.bytes = 0;
      f.op.reset();
      Complete(w->second, Json(),
               Status(Code::kFailedPrecondition, "training run " + run_id + " was deactivated before it ran",
                      "model_id"));
    }
    ClearReplay(run);
    record = run.info;
  }
  rt_.DropHeld(run_id);  // the worker holding it lets it go at its next lease
  return Journal([&](LoopJournal& j) { return j.PutRun(record); }, "run " + run_id);
}

}  // namespace burst
