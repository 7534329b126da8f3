// Loops::Recover: a control plane started after a crash takes over the
// training loops its journal holds (runtime/loop_journal.h).
#include <cstdio>

#include "core/utc.h"
#include "runtime/loops.h"
#include "train/loop_data.h"

namespace burst {

namespace {
int64_t BytesOf(const LoopPayload& p) { return p ? static_cast<int64_t>(p->size()) : 0; }
}  // namespace

Result<int> Loops::Recover() {
  if (!journal_) return 0;
  auto loaded = journal_->Load();
  if (!loaded.ok()) return loaded.status();
  JournalContents& j = loaded.value();
  for (const std::string& why : j.skipped)
    std::fprintf(stderr, "%s loops: journal record not read, left in place: %s\n", UtcNow(kUtcSql).c_str(),
                 why.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = rt_.clock().NowMs();
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
          run.replay_bytes += BytesOf(r.op);
          org_bytes_[info.org_id] += BytesOf(r.op);
          run.version = r.version;
        }
        run.next_seq = r.seq_id + 1;
      } else {
        f->op = r.op;
        f->bytes = BytesOf(r.op);
        run.waiting_bytes += f->bytes;
        org_bytes_[info.org_id] += f->bytes;
      }
      run.by_seq[r.seq_id] = f;
      futures_[f->id] = f;
    }
    ++runs;
  }
  for (auto& [id, run] : runs_) Pump(run);
  return runs;
}

}  // namespace burst
