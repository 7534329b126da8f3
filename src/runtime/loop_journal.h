// LoopJournal: what training loops keep in the object store so that a
// control plane started after a crash (or a standby taking over, which
// shares the store) goes on with them: sessions, samplers, runs, and each
// request a run accepted, with its outcome once it ran.
//
// Keys, under loops/ORG/:
//   sessions/SESSION.json        {"created_ms", "finished": reason or null}
//   samplers/SAMPLER.json        the sampler's record
//   runs/RUN/run.json            the run's info (LoopRunInfo)
//   runs/RUN/state.json          {"snapshot", "version"}: its newest restore point
//   runs/RUN/requests/SEQ.cbor   {"id", "type", "seq_id", "created_ms", "meta", "op"}
//   runs/RUN/results/SEQ.json    {"result"} or {"error"}, and "version" after it
// SEQ is zero-padded so that a listing is in seq_id order.
//
// A request is written before its future is handed to the client, its
// outcome before the result is. Load reads all of it back: the requests a
// restore point does not cover are replayed to rebuild the run (they are
// deterministic: the same bits), those without an outcome run again.
//
// Thread-safety: every method may be called from any thread (the store's).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "store/object_store.h"

namespace burst {

struct LoopRunInfo;

// A request as the journal holds it.
struct JournalRequest {
  std::string id;  // the future's ("req-...")
  std::string type;
  int64_t seq_id = 0;
  int64_t created_ms = 0;
  Json meta = Json::object();
  std::shared_ptr<const std::vector<uint8_t>> op;  // CBOR
  // Its outcome, once it ran:
  bool done = false;
  Json result;           // on success
  Status error;          // on failure
  int64_t version = -1;  // the run's version after it
};

struct JournalRun {
  Json info;                             // LoopRunInfoJson
  Json snapshot;                         // null: a fresh adapter
  int64_t version = 0;                   // the snapshot's
  std::vector<JournalRequest> requests;  // by seq_id
};

struct JournalContents {
  std::map<std::string, Json> sessions;  // id -> {"org_id", "created_ms", "finished"}
  std::map<std::string, Json> samplers;  // id -> record
  std::map<std::string, JournalRun> runs;
  std::vector<std::string> skipped;  // records that could not be read (key: why), left in place
};

Json LoopRunInfoJson(const LoopRunInfo& r);
LoopRunInfo LoopRunInfoOf(const Json& j);

class LoopJournal {
 public:
  explicit LoopJournal(ObjectStore& store) : store_(store) {}

  Status PutSession(const std::string& org_id, const std::string& id, int64_t created_ms,
                    const std::string& finished);
  Status DeleteSession(const std::string& org_id, const std::string& id);
  Status PutSampler(const std::string& org_id, const std::string& id, const Json& record);
  Status DeleteSampler(const std::string& org_id, const std::string& id);
  Status PutRun(const LoopRunInfo& info);
  // Forgets a run's journal (a run forgotten, or one whose making failed).
  Status DeleteRun(const std::string& org_id, const std::string& run_id);
  Status PutRestorePoint(const std::string& org_id, const std::string& run_id, const Json& snapshot,
                         int64_t version);
  Status PutRequest(const std::string& org_id, const std::string& run_id, const JournalRequest& r);
  Status PutOutcome(const std::string& org_id, const std::string& run_id, int64_t seq_id, const Json& result,
                    const Status& error, int64_t version);
  // Drops a request and its outcome (no longer needed to replay nor fetched).
  Status DropRequest(const std::string& org_id, const std::string& run_id, int64_t seq_id);

  // Everything in the journal. A record that cannot be read is named in
  // `skipped` and left alone; a store that cannot be listed is an error.
  Result<JournalContents> Load() const;

 private:
  ObjectStore& store_;
};

}  // namespace burst
