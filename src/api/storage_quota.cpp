#include "api/storage_quota.h"

#include <cstdio>

namespace burst {
namespace {

constexpr int64_t kListEveryMs = 60'000;

std::string Bytes(int64_t n) {
  char buf[64];
  if (n >= (1LL << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(n) / (1LL << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(n) / (1LL << 20));
  return buf;
}

}  // namespace

Result<int64_t> StorageQuota::Used(const std::string& org_id, int64_t now_ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = counts_.find(org_id);
    if (it != counts_.end() && it->second.listed_ms >= 0 && now_ms - it->second.listed_ms < kListEveryMs) {
      return it->second.bytes;
    }
  }
  // Listed without the lock: another organisation's check does not wait for it.
  auto objects = store_.List("orgs/" + org_id + "/");
  if (!objects.ok()) return objects.status();
  int64_t bytes = 0;
  for (const ObjectInfo& o : objects.value()) bytes += o.size;
  std::lock_guard<std::mutex> lock(mu_);
  counts_[org_id] = {bytes, now_ms};
  return bytes;
}

Status StorageQuota::Check(const std::string& org_id, int64_t more, const std::string& param,
                           int64_t now_ms) {
  if (max_ <= 0) return Status();
  auto used = Used(org_id, now_ms);
  if (!used.ok()) return used.status();
  if (used.value() + more <= max_) return Status();
  return Status(Code::kResourceExhausted,
                "your organisation stores " + Bytes(used.value()) +
                    (more > 0 ? " and this adds " + Bytes(more) : "") + ", over its quota of " + Bytes(max_) +
                    "; delete files (DELETE /v1/files/{id}) or checkpoints (DELETE /v1/models/{id}) first",
                param, "org_cap");
}

void StorageQuota::Added(const std::string& org_id, int64_t bytes) {
  if (max_ <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counts_.find(org_id);
  if (it != counts_.end()) it->second.bytes += bytes;
}

}  // namespace burst
