// Loops and their journal (runtime/loop_journal.h): the writes, and
// Recover, by which a control plane started after a crash takes over the
// training loops the journal holds.
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "core/utc.h"
#include "runtime/loops.h"
#include "runtime/loops_internal.h"
#include "train/loop_data.h"

namespace burst {

Result<int> Loops::Recover() {
  if (!journal_) return 0;
  auto loaded = journal_->Load();
  if (!loaded.ok()) return loaded.status();
  JournalContents& j = loaded.value();
  for (const std::string& why : j.skipped)
    std::fprintf(stderr, "%s loops: journal record not read, left in place: %s\n", UtcNow(kUtcSql).c_str(),
                 why.c_str());
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t now = rt_.clock().NowMs();
  std::vector<std::string> inactive;
  for (auto& [id, rec] : j.sessions) {
    sessions_[id] = {rec.value("org_id", ""), now};  // a day from now to send a heartbeat
    if (rec.value("finished", Json()).is_string()) finished_[id] = rec["finished"].get<std::string>();
  }
  for (auto& [id, rec] : j.samplers) samplers_[id] = std::move(rec);
  int runs = 0;
  for (auto it = j.runs.begin(); it != j.runs.end(); ++it) {
    const std::string& id = it->first;
    JournalRun& jr = it->second;
    LoopRunInfo info;
    if (Status s = Try([&] { info = LoopRunInfoOf(jr.info); }); !s.ok()) {
      std::fprintf(stderr, "%s loops: journal: run %s not taken over: %s\n", UtcNow(kUtcSql).c_str(),
                   id.c_str(), s.ToString().c_str());
      continue;
    }
    info.last_request_ms = now;
    RunState& run = runs_[id];
    run.info = info;
    if (!info.active) {  // deactivated: its record only
      run.parked = true;
      inactive.push_back(id);
      ++runs;
      continue;
    }
    run.snapshot = jr.snapshot;
    run.version = jr.version;
    run.next_seq = jr.requests.empty() ? 1 : jr.requests.front().seq_id;
    run.journaled_from = run.next_seq;
    // The requests that finished, in order: their results are fetched as
    // before; those that changed the run after its restore point replay.
    // From the first one without an outcome on, all run again (the later
    // outcomes were of the same requests, so they come out the same).
    bool pending = false;
    for (JournalRequest& r : jr.requests) {
      if (r.seq_id != run.next_seq && !pending) pending = true;  // a gap: what follows waits its turn
      auto f = std::make_shared<LoopFuture>();
      f->id = r.id;
      f->org_id = info.org_id;
      f->run = id;
      f->type = r.type;
      f->seq_id = r.seq_id;
      f->meta = r.meta;
      f->created_ms = r.created_ms;
      pending = pending || !r.done;
      if (!pending) {
        f->done = true;
        f->finished_ms = now;
        f->error = r.error;
        f->result = r.result;
        f->bytes = 0;
        if (r.error.ok() && LoopOpChangesState(r.type) && r.version > run.version) {
          run.replay.push_back(r.op);
          run.replay_bytes += PayloadBytes(r.op);
          org_bytes_[info.org_id] += PayloadBytes(r.op);
          run.version = r.version;
        }
        run.next_seq = r.seq_id + 1;
      } else {
        f->op = r.op;
        f->bytes = PayloadBytes(r.op);
        run.waiting_bytes += f->bytes;
        org_bytes_[info.org_id] += f->bytes;
      }
      run.by_seq[r.seq_id] = f;
      futures_[f->id] = f;
    }
    ++runs;
  }
  for (auto& [id, run] : runs_) Pump(run);
  lock.unlock();
  for (const std::string& id : inactive) rt_.DropHeld(id);  // a worker that outlived the restart lets it go
  return runs;
}

Status Loops::Journal(const std::function<Status(LoopJournal&)>& write, const std::string& what) {
  if (!journal_) return Status();
  Status s = write(*journal_);
  if (!s.ok()) {
    std::fprintf(stderr, "%s loops: journal: %s: %s\n", UtcNow(kUtcSql).c_str(), what.c_str(),
                 s.ToString().c_str());
    return Status(Code::kUnavailable, "the training loop journal cannot be written (" + s.message() + ")",
                  "");
  }
  return s;
}

void Loops::JournalOutcome(const std::string& run_id, const LoopFuture& f, const Json& result,
                           const Status& error) {
  int64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Cut short by this control plane stopping: it runs again after the restart.
    if (stopping_ && !error.ok()) return;
    version = runs_.at(run_id).version + (error.ok() && LoopOpChangesState(f.type) ? 1 : 0);
  }
  // A request whose outcome is not journaled runs again after a restart,
  // with every later one: they are deterministic, so nothing changes.
  Status written = Journal(
      [&](LoopJournal& j) {
        return j.PutOutcome(f.org_id, run_id, f.seq_id,
                            error.ok() ? result.value("result", Json::object()) : Json(), error, version);
      },
      "outcome of " + f.id);
  if (!written.ok() || !error.ok() || !result.contains("snapshot") || !result["snapshot"].is_object() ||
      result["snapshot"].value("version", int64_t{-1}) != version) {
    written.IgnoreError("logged by Journal; the request replays after a restart");
    return;
  }
  if (!Journal(
           [&](LoopJournal& j) { return j.PutRestorePoint(f.org_id, run_id, result["snapshot"], version); },
           "restore point of " + run_id)
           .ok())
    return;  // logged; the older restore point and the requests after it stay
  // The restore point covers the requests before this one: those whose
  // results were fetched (or let go) leave the journal.
  std::vector<int64_t> drop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RunState& r = runs_.at(run_id);
    for (; r.journaled_from < f.seq_id; ++r.journaled_from) {
      auto it = r.by_seq.find(r.journaled_from);
      if (it != r.by_seq.end() && it->second->fetched_ms == 0) break;
      drop.push_back(r.journaled_from);
    }
  }
  for (int64_t seq : drop) {
    if (!Journal([&](LoopJournal& j) { return j.DropRequest(f.org_id, run_id, seq); }, "dropping a request")
             .ok())
      return;  // logged; kept, it is only read again
  }
}

}  // namespace burst
