#include "core/waker.h"

namespace burst {

void Waker::Wake() {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (woken_) return;
    woken_ = true;
    notify = std::move(notify_);
    notify_ = nullptr;
  }
  if (notify) notify();
}

bool Waker::woken() {
  std::lock_guard<std::mutex> lock(mu_);
  return woken_;
}

void Waker::Attach(std::function<void()> notify) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!woken_) {
      notify_ = std::move(notify);
      return;
    }
  }
  notify();
}

void Waker::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  notify_ = nullptr;
}

}  // namespace burst
