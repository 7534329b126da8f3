// Waker: wakes something waiting without a thread of its own, once. The
// HTTP server's parked requests (api/http/message.h, Response::park) wait
// on one; whoever finishes the work they wait for (a training loop's
// request, a sampling call) wakes it. Wake may come before the waiting side
// has attached, or after it gave up: the first wake counts, later ones do
// nothing.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <mutex>

namespace burst {

class Waker {
 public:
  void Wake();
  bool woken();
  // The waiting side: `notify` runs on the first Wake (at once, on this
  // thread, when that already happened).
  void Attach(std::function<void()> notify);
  void Detach();

 private:
  std::mutex mu_;
  bool woken_ = false;            // GUARDED_BY(mu_)
  std::function<void()> notify_;  // GUARDED_BY(mu_)
};

}  // namespace burst
