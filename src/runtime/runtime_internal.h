// Helpers shared by the runtime's source files (runtime*.cpp); not part of
// its API. Everything here runs under the runtime's mutex or touches no state.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/json.h"
#include "core/metrics.h"
#include "core/states.h"
#include "db/metadata.h"
#include "store/keys.h"

namespace burst::runtime_internal {

// Why a failed SaveWorker is ignored where it is: SaveWorker has logged it,
// and the worker's record stays in memory to be written again.
inline constexpr const char* kKept = "SaveWorker logged it; the record stays to be written again";

inline Json ErrorJson(const std::string& code, const std::string& message, const std::string& param = "") {
  return {{"code", code}, {"message", message}, {"param", param.empty() ? Json() : Json(param)}};
}

inline int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A failure nobody can be answered about (a write inside a dispatch round or
// a tick): it goes to the operator's stderr, never nowhere.
inline void LogFailure(const std::string& what, const Status& s) {
  std::fprintf(stderr, "burst serve: %s: %s\n", what.c_str(), s.ToString().c_str());
}

// Lease lost: the attempt or call is no longer this worker's (409
// lease_lost; the worker drops it).
inline Status LeaseLost(const std::string& message) {
  return Status(Code::kFailedPrecondition, message, "attempt", "lease_lost");
}

// Where a worker sits, for events: "slot 2", or "h100 GPU 0,1".
inline std::string WhereText(const WorkerRecord& r) {
  if (r.device == "cpu") return "slot " + std::to_string(r.slot);
  std::string ids;
  for (int64_t g : r.gpus) ids += (ids.empty() ? "" : ",") + std::to_string(g);
  return r.device + " GPU " + ids;
}

// An event in the job's log. Events narrate; the job's state is written
// elsewhere, so a failed event write is logged and the caller goes on.
inline void AddEvent(Metadata& md, const std::string& job_id, const std::string& message,
                     const std::string& level = "info", const Json& data = Json()) {
  EventRecord e;
  e.job_id = job_id;
  e.level = level;
  e.type = "message";
  e.message = message;
  e.data = data;
  if (Status s = md.AddEvents({e}); !s.ok())
    LogFailure("cannot add the event \"" + message + "\" to " + job_id, s);
}

// A task's usage line, billing scope and run, from its job; kDataLoss for a
// scope this binary does not know.
template <typename Task>
Status SetTaskBilling(Task& t, const JobRecord& j) {
  const bool eval = j.kind() == TaskKind::kEval, batch = j.kind() == TaskKind::kBatch;
  auto scope = RecordedScope(j.spec, "job " + j.id);
  if (!scope.ok()) return scope.status();
  t.line = eval ? UsageLine::kEvaluation : batch ? UsageLine::kBatch : UsageLine::kTraining;
  t.scope = scope.value();
  // An evaluation's or a batch's spend is the run's whose checkpoint it uses.
  t.run = eval || batch ? JobOfKey(j.spec.value("checkpoint_prefix", "")) : j.id;
  return Status();
}

}  // namespace burst::runtime_internal
