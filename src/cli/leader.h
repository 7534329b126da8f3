// LeaderElector: keeps this control plane's claim on the leader lease in
// the database (Metadata::TryLead) when several share one database.
//
// Start() tries once and calls on_active() (this one leads: recover and run)
// or on_standby(url) (another leads, at url). Then a thread retries every
// ttl/3: a standby whose turn comes (the leader's lease expired: it died or
// resigned) calls on_active(); the active one renews, and when it cannot
// (the database unreachable until its lease ran out, or another holder took
// it) calls on_lost(), which must stop all work at once: another control
// plane may already run it.
//
// Thread-safety: the callbacks run on Start's caller or the elector's thread,
// one at a time.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "core/status.h"
#include "db/metadata.h"

namespace burst {

class LeaderElector {
 public:
  struct Callbacks {
    std::function<Status(int64_t term)> on_active;
    std::function<void(const std::string& leader_url)> on_standby;
    std::function<void(const std::string& why)> on_lost;
  };
  LeaderElector(Metadata& md, std::string holder, std::string url, int64_t ttl_ms, Callbacks callbacks);
  ~LeaderElector();

  // The first try (errors: the database's, or on_active's) and the thread.
  Status Start();
  // Ends the thread; a leader gives the lease up so a standby takes over at once.
  void Stop();
  bool active() const;

 private:
  void Loop();
  static int64_t NowMs();

  Metadata& md_;
  const std::string holder_, url_;
  const int64_t ttl_ms_;
  Callbacks cb_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, active_ = false;
  int64_t renewed_ms_ = 0;  // when the lease was last taken or renewed
  std::string leader_url_;
  std::thread thread_;
};

}  // namespace burst
