// Deployments (docs/api.md, "Deployments"): a name that serves one
// checkpoint through POST /v1/completions and /v1/chat/completions, on
// replicas that scale from zero (the scheduler's side is in
// runtime/runtime.h). This file turns a POST /v1/deployments body into a
// record and renders the deployment object.
//
// Thread-safety: stateless. Errors: throw burst::Error naming the field.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/json.h"
#include "db/metadata.h"
#include "runtime/gpu_request.h"

namespace burst {

class ObjectStore;

// Validates the body ({name, checkpoint, min_replicas, max_replicas,
// scaledown_window_s, max_concurrency}; unknown fields are errors), fills in
// the defaults and resolves the checkpoint once, so the deployment serves
// exactly it for its whole life. The pool's slots (CPU and GPU) bound
// max_replicas; `gpu` (gpu_request.h) is checked against it.
DeploymentRecord ParseDeploymentRequest(const Json& body, const std::string& org_id, Metadata& md,
                                        const std::vector<std::filesystem::path>& model_roots,
                                        const SlotPool& pool, const ObjectStore* store = nullptr);

// The deployment object: its request, status, live replicas (`state` from
// Runtime::DeploymentState), calls answered, idle time and cost so far
// (`billed`: the usage already closed into the ledger).
Json DeploymentJson(const DeploymentRecord& d, const Json& state, const UsageSum& billed, int64_t now_ms);

}  // namespace burst
