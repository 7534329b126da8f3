// KeyRates: how many requests each API key may send, as a token bucket per
// key: `per_s` a second on average, bursts of `burst` at once. Past it a
// request is refused with kResourceExhausted (reason rate_limit) saying
// when to retry, so one script in a loop cannot take the server's request
// threads from the other keys of its organisation, or from other
// organisations.
//
// Bounded: a key idle long enough for its bucket to be full again holds
// nothing (its entry goes at the next sweep, at most once a second).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "core/status.h"

namespace burst {

class KeyRates {
 public:
  // per_s > 0; burst >= 1.
  KeyRates(double per_s, double burst) : per_s_(per_s), burst_(burst) {}

  // OK and one request counted, or kResourceExhausted (rate_limit) naming
  // the key's rate and when the next request passes (*retry_after_s).
  Status Admit(const std::string& key_id, int64_t now_ms, int* retry_after_s = nullptr);
  size_t keys() const;  // keys with a bucket now (tests)

 private:
  struct Bucket {
    double tokens = 0;
    int64_t at_ms = 0;
  };
  const double per_s_, burst_;
  mutable std::mutex mu_;
  std::map<std::string, Bucket> buckets_;  // GUARDED_BY(mu_)
  int64_t swept_ms_ = 0;
};

}  // namespace burst
