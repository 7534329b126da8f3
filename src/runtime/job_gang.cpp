#include "runtime/job_gang.h"

#include <algorithm>

namespace burst {

JobGang JobGang::FromSpec(const Json& spec, const std::string& auto_communication) {
  const std::string c = spec.value("communication", std::string("auto"));
  return JobGang(spec.value("workers", int64_t{1}), c == "auto" ? auto_communication : c);
}

Status JobGang::FitsIn(int slots) const {
  if (size_ <= 1 || size_ <= slots) return Status();
  return Status(Code::kInvalidArgument,
                "this server runs at most " + std::to_string(slots) + " worker" + (slots == 1 ? "" : "s") +
                    " at once (burst serve --slots), so a job cannot ask for " + std::to_string(size_),
                "workers");
}

void JobGang::Form(const std::vector<std::string>& workers, int64_t lease_until_ms) {
  Clear();
  for (const std::string& w : workers) members_.push_back(GangMember{w, lease_until_ms, false, false});
}

void JobGang::Clear() {
  members_.clear();
  rendezvous_.clear();
}

int JobGang::MemberRank(const std::string& worker) const {
  for (size_t i = 0; i < members_.size(); ++i)
    if (members_[i].worker == worker) return static_cast<int>(i) + 1;
  return -1;
}

bool JobGang::AnyDelivered() const {
  return std::any_of(members_.begin(), members_.end(), [](const GangMember& m) { return m.delivered; });
}

Status JobGang::Publish(const std::string& address, bool* changed) {
  if (address.size() > 256)
    return Status(Code::kInvalidArgument, "an address of at most 256 bytes", "address");
  *changed = rendezvous_ != address;
  rendezvous_ = address;
  return Status();
}

Json JobGang::MemberJson(int rank, const std::string& job_prefix, int64_t attempt, int64_t timeout_ms,
                         int64_t average_every) const {
  return {{"rank", rank},
          {"size", size_},
          {"communication", communication_},
          {"channel", job_prefix + "channel/attempt-" + std::to_string(attempt) + "/"},
          {"timeout_s", static_cast<double>(timeout_ms) / 1000.0},
          {"average_every", average_every}};
}

}  // namespace burst
