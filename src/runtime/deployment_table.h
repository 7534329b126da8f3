// DeploymentTable: the live deployments as the scheduler weighs them: each
// one's sizing (min and max replicas, idle window, calls per replica) read
// once from its request, the calls waiting for its replicas, and the
// organisations' caps on creating more. Which workers are its replicas is
// the runtime's (a worker's record names its deployment); what the table
// answers depends on the deployments alone, so it is tested on its own.
//
// Thread-safety: none of its own; the runtime holds its scheduler's lock
// around every use (a dispatch decision weighs replicas and waiting calls
// together).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "core/states.h"
#include "core/status.h"
#include "db/metadata.h"
#include "runtime/gpu_slots.h"
#include "runtime/worker_call.h"

namespace burst {

struct LiveDeployment {
  DeploymentRecord rec;
  int64_t min_replicas = 0, max_replicas = 1, window_ms = 0, max_concurrency = 1;
  BillingScope scope = BillingScope::kDedicated;
  std::string run;                   // the fine-tuning job whose checkpoint it serves ("" = a base model)
  std::vector<DeviceClaim> devices;  // its replicas' GPUs, in order of preference (empty: CPU slots)
  std::deque<std::shared_ptr<WorkerCall>> waiting;

  // The replicas a load asks for: `busy` calls on its replicas and those
  // waiting, max_concurrency per replica, between min and max replicas.
  int64_t ReplicasWanted(int64_t busy) const;
};

class DeploymentTable {
 public:
  // What an organisation may hold: live deployments (0 = no cap), and the
  // slots its deployments' min_replicas keep live.
  struct Caps {
    int max_per_org = 0;
    int64_t max_min_replicas = 0;
    int slots = 1;  // the pool's, for the message
  };
  // Whether a new deployment `d` may be created: kResourceExhausted
  // (reason org_cap, param max_deployments or min_replicas) over a cap.
  // A request for a live name of the organisation is never refused here
  // (it answers with that deployment, or a conflict, elsewhere).
  Status Admit(const DeploymentRecord& d, const Caps& caps) const;
  // Adds a created (or recovered) deployment, its sizing read from its
  // request; kDataLoss for a billing scope this binary does not know.
  Status Add(const DeploymentRecord& rec);
  // Removes it and returns the calls that were waiting for its replicas
  // (the caller ends them).
  std::deque<std::shared_ptr<WorkerCall>> Remove(const std::string& id);
  LiveDeployment* Find(const std::string& id);
  const LiveDeployment* Find(const std::string& id) const;
  // Calls of the organisation waiting for any deployment's replicas.
  size_t WaitingOf(const std::string& org) const;
  // Drops `call` from its deployment's waiting calls (nothing if absent).
  void Unqueue(const std::shared_ptr<WorkerCall>& call);

  using Map = std::map<std::string, LiveDeployment>;  // by id
  Map::iterator begin() { return live_.begin(); }
  Map::iterator end() { return live_.end(); }
  Map::const_iterator begin() const { return live_.begin(); }
  Map::const_iterator end() const { return live_.end(); }

 private:
  Map live_;
};

}  // namespace burst
