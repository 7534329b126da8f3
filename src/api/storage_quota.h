// StorageQuota: the bytes each organisation stores (everything under its
// orgs/{org}/ prefix in the object store: uploaded files, its jobs'
// checkpoints, metrics and logs, its training loops' checkpoints), checked
// against a quota (`burst serve --org-max-storage`) before anything adds to
// them: an upload, a job or sweep, a loop's save.
//
// The store is listed at most once a minute per organisation; bytes this
// server adds in between (uploads) are counted as they are added. Checks
// are made before the write, so requests running at once may pass the
// quota by what they add together.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "core/status.h"
#include "store/object_store.h"

namespace burst {

class StorageQuota {
 public:
  // max_bytes_per_org 0: no quota (Check passes without listing).
  StorageQuota(const ObjectStore& store, int64_t max_bytes_per_org)
      : store_(store), max_(max_bytes_per_org) {}

  // OK when the organisation stores at most its quota with `more` bytes
  // added; else kResourceExhausted (reason org_cap) naming `param`.
  Status Check(const std::string& org_id, int64_t more, const std::string& param, int64_t now_ms);
  // `bytes` were just stored (or, negative, deleted) for the organisation.
  void Added(const std::string& org_id, int64_t bytes);
  // What it stores now, as last counted (listing the store when the count
  // is older than a minute).
  Result<int64_t> Used(const std::string& org_id, int64_t now_ms);
  int64_t max_bytes_per_org() const { return max_; }

 private:
  struct Count {
    int64_t bytes = 0;
    int64_t listed_ms = -1;
  };
  const ObjectStore& store_;
  const int64_t max_;
  std::mutex mu_;
  std::map<std::string, Count> counts_;  // GUARDED_BY(mu_)
};

}  // namespace burst
