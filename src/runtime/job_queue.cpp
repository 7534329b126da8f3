#include "runtime/job_queue.h"

#include <algorithm>

namespace burst {

std::vector<std::string> JobTask::WorkerIds() const {
  std::vector<std::string> ids{worker};
  for (const GangMember& m : gang.members()) ids.push_back(m.worker);
  return ids;
}

std::string JobTask::DeviceClass() const {
  if (devices.empty()) return "cpu";
  std::string key;
  for (const DeviceClaim& c : devices) key += (key.empty() ? "" : "|") + c.Text();
  return key;
}

void JobQueue::Enqueue(JobTask t) {
  t.worker.clear();
  t.delivered = false;
  t.cancel = false;
  t.gang.Clear();
  queue_[t.org_id][t.DeviceClass()].push_back(t.job_id);
  // Only CPU workers are counted: a GPU task's starts are its own (WorkerPool::StartingFor).
  const int64_t asks = t.devices.empty() ? t.gang.size() : 0;
  auto [pos, added] = asked_by_queued_.emplace(t.job_id, asks);
  if (added) {
    asked_ += asks;
  } else {  // queued twice: asks once, as now
    asked_ += asks - pos->second;
    pos->second = asks;
  }
  const std::string id = t.job_id;
  tasks_[id] = std::move(t);
}

void JobQueue::Unqueue(const std::string& org, const std::string& job_id) {
  auto it = queue_.find(org);
  if (it == queue_.end()) return;
  auto t = tasks_.find(job_id);  // its devices never change once it is queued
  if (t == tasks_.end()) return;
  auto cls = it->second.find(t->second.DeviceClass());
  if (cls == it->second.end()) return;
  auto& dq = cls->second;
  auto pos = std::find(dq.begin(), dq.end(), job_id);
  if (pos == dq.end()) return;
  dq.erase(pos);
  const bool again = std::find(dq.begin(), dq.end(), job_id) != dq.end();  // queued twice: still once
  if (dq.empty()) it->second.erase(cls);
  if (it->second.empty()) queue_.erase(it);
  if (again) return;
  if (auto a = asked_by_queued_.find(job_id); a != asked_by_queued_.end()) {
    asked_ -= a->second;
    asked_by_queued_.erase(a);
  }
}

void JobQueue::Erase(const std::string& job_id) { tasks_.erase(job_id); }

JobTask* JobQueue::Find(const std::string& job_id) {
  auto it = tasks_.find(job_id);
  return it == tasks_.end() ? nullptr : &it->second;
}

const JobTask* JobQueue::Find(const std::string& job_id) const {
  auto it = tasks_.find(job_id);
  return it == tasks_.end() ? nullptr : &it->second;
}

JobTask* JobQueue::Next(int64_t now, const std::set<std::string>& skip) {
  JobTask* best = nullptr;
  int best_running = 0;
  int64_t best_served = 0;
  for (auto& [org, classes] : queue_) {
    auto r_it = running_.find(org);
    auto s_it = last_served_.find(org);
    const int r = r_it == running_.end() ? 0 : r_it->second;
    const int64_t served = s_it == last_served_.end() ? 0 : s_it->second;
    for (auto& [cls, dq] : classes) {
      if (skip.count(cls)) continue;
      for (const std::string& id : dq) {
        JobTask& t = tasks_[id];
        if (t.not_before_ms > now) continue;
        if (!best || r < best_running || (r == best_running && served < best_served) ||
            (r == best_running && served == best_served && t.seq < best->seq)) {
          best = &t;
          best_running = r;
          best_served = served;
        }
        break;  // the first ready task of each organisation and device class
      }
    }
  }
  return best;
}

void JobQueue::Started(const JobTask& t, int64_t serve_tick) {
  ++running_[t.org_id];
  running_ids_.insert(t.job_id);
  last_served_[t.org_id] = serve_tick;
}

JobTask& JobQueue::AdoptRunning(JobTask t) {
  ++running_[t.org_id];
  running_ids_.insert(t.job_id);
  const std::string id = t.job_id;
  return tasks_[id] = std::move(t);
}

void JobQueue::Stopped(const JobTask& t) {
  auto it = running_.find(t.org_id);
  if (it != running_.end() && it->second > 0) --it->second;
  running_ids_.erase(t.job_id);
}

int JobQueue::Active(const std::string& org) const {
  auto queued = queue_.find(org);
  auto running = running_.find(org);
  int n = running == running_.end() ? 0 : running->second;
  if (queued != queue_.end())
    for (const auto& [cls, dq] : queued->second) n += static_cast<int>(dq.size());
  return n;
}

size_t JobQueue::QueuedCount() const {
  size_t n = 0;
  for (const auto& [org, classes] : queue_)
    for (const auto& [cls, dq] : classes) n += dq.size();
  return n;
}

std::map<std::string, int64_t> JobQueue::QueuedByOrg() const {
  std::map<std::string, int64_t> n;
  for (const auto& [org, classes] : queue_)
    for (const auto& [cls, dq] : classes) n[org] += static_cast<int64_t>(dq.size());
  return n;
}

}  // namespace burst
