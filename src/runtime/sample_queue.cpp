#include "runtime/sample_queue.h"

#include <algorithm>
#include <tuple>

namespace burst {

bool SampleQueue::OtherAskedLately(const std::string& org, int64_t now) const {
  for (const auto& [other, at] : asked_at_) {
    if (other != org && now - at < kShareWindowMs) return true;
  }
  return false;
}

bool SampleQueue::Remove(const std::shared_ptr<WorkerCall>& call) {
  auto pos = std::find(calls_.begin(), calls_.end(), call);
  if (pos == calls_.end()) return false;
  calls_.erase(pos);
  return true;
}

std::vector<std::shared_ptr<WorkerCall>> SampleQueue::FairOrder(
    const std::function<int(const std::string&)>& held) const {
  std::vector<std::tuple<int, int64_t, size_t>> order;
  order.reserve(calls_.size());
  std::map<std::string, int> held_by;
  for (size_t i = 0; i < calls_.size(); ++i) {
    const std::string& org = calls_[i]->org_id;
    auto h = held_by.find(org);
    if (h == held_by.end()) h = held_by.emplace(org, held(org)).first;
    auto served = served_.find(org);
    order.emplace_back(h->second, served == served_.end() ? 0 : served->second, i);
  }
  std::sort(order.begin(), order.end());
  std::vector<std::shared_ptr<WorkerCall>> out;
  out.reserve(order.size());
  for (const auto& [busy, served, index] : order) out.push_back(calls_[index]);
  return out;
}

void SampleQueue::Took(const std::shared_ptr<WorkerCall>& call, int64_t serve_tick) {
  Remove(call);
  served_[call->org_id] = serve_tick;
}

std::deque<std::shared_ptr<WorkerCall>> SampleQueue::TakeAll() {
  std::deque<std::shared_ptr<WorkerCall>> all;
  all.swap(calls_);
  return all;
}

size_t SampleQueue::WaitingOf(const std::string& org) const {
  size_t n = 0;
  for (const auto& c : calls_) n += c->org_id == org;
  return n;
}

}  // namespace burst
