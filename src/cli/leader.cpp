#include "cli/leader.h"

#include <chrono>
#include <cstdio>

namespace burst {

LeaderElector::LeaderElector(Metadata& md, std::string holder, std::string url, int64_t ttl_ms,
                             Callbacks callbacks)
    : md_(md), holder_(std::move(holder)), url_(std::move(url)), ttl_ms_(ttl_ms), cb_(std::move(callbacks)) {}

LeaderElector::~LeaderElector() { Stop(); }

int64_t LeaderElector::NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool LeaderElector::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}

Status LeaderElector::Start() {
  const int64_t now = NowMs();
  auto lease = md_.TryLead(holder_, url_, now, ttl_ms_);
  if (!lease.ok()) return lease.status();
  if (lease.value().held) {
    if (Status s = cb_.on_active(lease.value().term); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    active_ = true;
    renewed_ms_ = now;
  } else {
    leader_url_ = lease.value().url;
    cb_.on_standby(leader_url_);
  }
  thread_ = std::thread([this] { Loop(); });
  return Status();
}

void LeaderElector::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(100, ttl_ms_ / 3)), [&] { return stop_; });
    if (stop_) break;
    const bool was_active = active_;
    lock.unlock();
    const int64_t now = NowMs();
    auto lease = md_.TryLead(holder_, url_, now, ttl_ms_);
    lock.lock();
    if (stop_) break;
    if (was_active) {
      if (lease.ok() && lease.value().held) {
        renewed_ms_ = now;
        continue;
      }
      // Still ours until it expires; past that, another may run the work.
      const std::string why = lease.ok()
                                  ? "control plane " + lease.value().holder + " at " + lease.value().url +
                                        " took the leader lease"
                                  : "the leader lease could not be renewed: " + lease.status().ToString();
      if (lease.ok() || now - renewed_ms_ >= ttl_ms_ - ttl_ms_ / 3) {
        active_ = false;
        lock.unlock();
        cb_.on_lost(why);
        lock.lock();
      } else {
        std::fprintf(stderr, "burst serve: %s; retrying\n", why.c_str());
      }
      continue;
    }
    if (!lease.ok()) {
      std::fprintf(stderr, "burst serve (standby): cannot read the leader lease: %s\n",
                   lease.status().ToString().c_str());
      continue;
    }
    if (!lease.value().held) {
      if (lease.value().url != leader_url_) {
        leader_url_ = lease.value().url;
        lock.unlock();
        cb_.on_standby(leader_url_);
        lock.lock();
      }
      continue;
    }
    renewed_ms_ = now;
    lock.unlock();
    Status s = cb_.on_active(lease.value().term);
    lock.lock();
    if (s.ok()) {
      active_ = true;
    } else {
      // Could not take over: give the lease back for another standby.
      std::fprintf(stderr, "burst serve: taking over failed: %s\n", s.ToString().c_str());
      lock.unlock();
      md_.Resign(holder_).IgnoreError("best effort: the lease expires by itself within its TTL");
      lock.lock();
    }
  }
}

void LeaderElector::Stop() {
  bool resign = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
    resign = active_;
    active_ = false;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (resign) {
    if (Status s = md_.Resign(holder_); !s.ok()) {
      std::fprintf(
          stderr,
          "burst serve: could not give the leader lease up (a standby takes over when it expires): %s\n",
          s.ToString().c_str());
    }
  }
}

}  // namespace burst
