// SampleQueue: the sampling and loop calls waiting for a pool worker (a
// deployment's calls wait in their deployment's queue instead), and the
// fairness among organisations when workers free up: the calls of the
// organisation holding the fewest pool workers for its calls go first;
// among equals, the one served least recently, then arrival order. One
// organisation's queue does not hold back another's next call.
//
// It also remembers when each organisation last asked for a call: an
// organisation's share of the pool's workers holds only while another one
// has asked within kShareWindowMs (RuntimeOptions::max_sampling_workers_per_org).
//
// Thread-safety: none of its own; the runtime's scheduler lock guards it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/worker_call.h"

namespace burst {

class SampleQueue {
 public:
  static constexpr int64_t kShareWindowMs = 10 * 60'000;

  // The organisation asked for a call at `now` (pool or deployment).
  void Asked(const std::string& org, int64_t now) { asked_at_[org] = now; }
  // Whether an organisation other than `org` asked within kShareWindowMs.
  bool OtherAskedLately(const std::string& org, int64_t now) const;

  // A new call waits at the back; one whose worker went away before taking
  // it goes back to the front.
  void Push(std::shared_ptr<WorkerCall> call) { calls_.push_back(std::move(call)); }
  void PushFront(std::shared_ptr<WorkerCall> call) { calls_.push_front(std::move(call)); }
  // Drops a waiting call (its caller left); false when it was not waiting.
  bool Remove(const std::shared_ptr<WorkerCall>& call);
  // The waiting calls in the order to try them (above); `held(org)`: the
  // pool workers the organisation holds for its calls now.
  std::vector<std::shared_ptr<WorkerCall>> FairOrder(
      const std::function<int(const std::string&)>& held) const;
  // A worker took the call: it leaves the queue, and its organisation was
  // served at `serve_tick` (a counter the scheduler shares with the jobs).
  void Took(const std::shared_ptr<WorkerCall>& call, int64_t serve_tick);
  // Every waiting call, taken out (the control plane is stopping).
  std::deque<std::shared_ptr<WorkerCall>> TakeAll();

  size_t WaitingOf(const std::string& org) const;
  const std::deque<std::shared_ptr<WorkerCall>>& calls() const { return calls_; }

 private:
  std::deque<std::shared_ptr<WorkerCall>> calls_;
  std::map<std::string, int64_t> served_;    // org -> serve tick of its last call
  std::map<std::string, int64_t> asked_at_;  // org -> when it last asked for a call
};

}  // namespace burst
