// A worker's loops (docs/loops.md): the training runs it holds
// in memory and one "loop" call of the workers' protocol applied to them.
//
// A call carries the request (op) and the run's restore recipe: the version
// the run is at (state-changing requests applied so far), its newest
// snapshot in the store and the state-changing requests after it. A worker
// holding the run at that version applies the request at once; any other
// (a cold start, a worker that took over from one that died) rebuilds the
// run from the snapshot (or a fresh adapter from the LoRA seed) and
// replays the requests first, so every result equals an undisturbed run's.
// The recipe (it holds the requests' data) travels only to a worker whose
// lease did not report holding the run; one that gets none and does not hold
// the run at that version answers kFailedPrecondition with param "restore",
// and the control plane sends the request again with the recipe.
// A request that fails drops the run from memory (its state may be half
// changed); the next one restores it.
//
// Sampling requests (op "sample") are not here: the worker decodes them in
// a batch with the others on the same weights (worker/sample_calls.h).
//
// Thread-safety: used by the worker's main loop only.
// Errors: RunLoopCall reports every failure to the control plane.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/json.h"
#include "store/object_store.h"
#include "train/loop_run.h"
#include "worker/base_models.h"
#include "worker/control_plane.h"
#include "worker/worker.h"

namespace burst {

class LoopRuns {
 public:
  LoopRuns(ObjectStore& store, BaseModels& models, std::filesystem::path dir)
      : store_(store), models_(models), dir_(std::move(dir)) {}

  // Applies a call's op; {"result", "usage", "snapshot"?}.
  Json Run(const Json& task);
  // The runs held (a lease's "loops").
  Json HeldRuns() const;
  // Lets the named runs go (the control plane says they are over: a
  // deactivated run); their memory and scratch files are freed, and they
  // are not parked. Runs not held are ignored.
  void Drop(const Json& run_ids);
  // Before the worker leaves: each run held with changes since its restore
  // point (and no gradients waiting) gets a new one, told to the control
  // plane, so the next worker restores it without replaying.
  void Park(ControlPlane& cp);

 private:
  struct Held {
    std::unique_ptr<LoopRun> run;
    std::shared_ptr<const BaseModel> base;  // keeps the base tensors alive
    int64_t version = 0;
    int64_t snapshot_version = 0;  // of the restore point it was built from (or wrote)
    std::string store_prefix;      // the run's folder
    int64_t last_used = 0;         // LoopRuns::uses_ at its last request
  };
  Held& Restore(const Json& task, const std::shared_ptr<const BaseModel>& base);
  // Applies a state-changing or reading op; the op's result.
  Json Apply(Held& h, const Json& op, const Json& task, Json* usage);
  void SaveState(const LoopRun& s, const std::string& prefix, int64_t version);
  void SaveSampler(const LoopRun& s, const std::string& prefix, const std::string& base_name);
  TensorMap LoadState(const std::string& prefix);

  ObjectStore& store_;
  BaseModels& models_;
  std::filesystem::path dir_;
  std::map<std::string, Held> runs_;
  int64_t uses_ = 0;
  Json restored_;  // set by Restore when it rebuilt the run: {replayed, from_snapshot}
};

// One loop call: runs it and posts its sample_result (the protocol's answer
// for every call), the error as {code, message, param} when it fails.
void RunLoopCall(ControlPlane& cp, const Json& task, LoopRuns& loops);

}  // namespace burst
