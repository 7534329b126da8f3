#include "core/key_rates.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace burst {

Status KeyRates::Admit(const std::string& key_id, int64_t now_ms, int* retry_after_s) {
  std::lock_guard<std::mutex> lock(mu_);
  const double refill_ms = burst_ / per_s_ * 1000;  // an empty bucket's time to fill
  if (now_ms - swept_ms_ >= 1000) {
    swept_ms_ = now_ms;
    for (auto it = buckets_.begin(); it != buckets_.end();)
      it = static_cast<double>(now_ms - it->second.at_ms) >= refill_ms ? buckets_.erase(it) : std::next(it);
  }
  auto [it, fresh] = buckets_.try_emplace(key_id, Bucket{burst_, now_ms});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min(
        burst_, b.tokens + static_cast<double>(std::max<int64_t>(0, now_ms - b.at_ms)) * per_s_ / 1000);
    b.at_ms = now_ms;
  }
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return Status();
  }
  const int wait_s = std::max(1, static_cast<int>(std::ceil((1 - b.tokens) / per_s_)));
  if (retry_after_s) *retry_after_s = wait_s;
  char rate[32];
  std::snprintf(rate, sizeof rate, "%g", per_s_);
  return Status(Code::kResourceExhausted,
                std::string("this API key sends more than ") + rate +
                    " requests a second, its limit (burst --key-max-rps); retry in " +
                    std::to_string(wait_s) + " s",
                "authorization", "rate_limit");
}

size_t KeyRates::keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_.size();
}

}  // namespace burst
