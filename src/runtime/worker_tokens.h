// WorkerTokens: which live worker a bearer token belongs to. Every request
// on /internal/v1 (leases, heartbeats, events, sampled pieces) asks it
// first, so it has a lock of its own that readers share, and answering it
// never waits for the scheduler's lock (runtime.h) while a dispatch round
// or a database write holds that.
//
// The runtime adds a worker's token when it starts or adopts the worker
// and removes it when it forgets the worker, in the same step, so a token
// found here is a live worker's.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace burst {

class WorkerTokens {
 public:
  void Add(const std::string& token_sha256, const std::string& worker_id) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    ids_[token_sha256] = worker_id;
  }
  void Remove(const std::string& token_sha256) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    ids_.erase(token_sha256);
  }
  // The worker whose token hashes to `token_sha256`, or nullopt.
  std::optional<std::string> Find(const std::string& token_sha256) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = ids_.find(token_sha256);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::string> ids_;  // GUARDED_BY(mu_)
};

}  // namespace burst
