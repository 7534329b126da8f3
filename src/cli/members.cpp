#include "cli/members.h"

#include <chrono>
#include <thread>

#include "core/fs.h"

namespace burst {

std::unique_ptr<Members> JoinMembers(const MemberArgs& a, TrainOptions* options) {
  if (a.members == 1 && a.exchange.empty()) return nullptr;
  if (a.members < 2)
    throw Error(Code::kInvalidArgument, "--members must be 2 or more with --exchange", "--members");
  if (a.rank < 0 || a.rank >= a.members) {
    throw Error(Code::kInvalidArgument, "--rank must be in [0, --members)", "--rank");
  }
  const size_t colon = a.exchange.find(':');
  const std::string kind = colon == std::string::npos ? a.exchange : a.exchange.substr(0, colon);
  const std::string where = colon == std::string::npos ? "" : a.exchange.substr(colon + 1);
  if ((kind != "store" && kind != "gloo") || where.empty()) {
    throw Error(Code::kInvalidArgument, "--exchange must be store:URL or gloo:FILE, not '" + a.exchange + "'",
                "--exchange");
  }
  const int64_t timeout_ms = a.timeout_s * 1000;
  if (a.average_every < 0)
    throw Error(Code::kInvalidArgument, "--average-every must be >= 0", "--average-every");
  auto m = std::make_unique<Members>();
  if (kind == "store") {
    m->store = OpenObjectStore(where).ValueOrThrow();
    m->channel.emplace(
        StoreChannel::Open(m->store.get(), {"channel/", a.rank, a.members, timeout_ms}).ValueOrThrow());
    StoreChannel* ch = &*m->channel;
    options->data_parallel = TrainOptions::DataParallel{
        a.rank, a.members,       [ch](std::vector<float>& flat) { return ch->AllReduceSum(flat); },
        true,   a.average_every, nullptr};
    return m;
  }
  GlooOptions go;
  go.rank = a.rank;
  go.size = a.members;
  go.timeout_ms = timeout_ms;
  go.host = a.host;
  const std::filesystem::path file = where;
  if (a.rank == 0) {
    m->gloo = GlooGroup::Listen(go).ValueOrThrow();
    WriteFileAtomic(file, m->gloo->address());
    std::fprintf(stderr, "burst: member 0 of %d, rendezvous at %s (written to %s)\n", a.members,
                 m->gloo->address().c_str(), file.string().c_str());
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!std::filesystem::exists(file)) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw Error(
            Code::kUnavailable,
            "member 0 wrote no address to " + file.string() + " within " + std::to_string(a.timeout_s) + " s",
            "--exchange");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    m->gloo = GlooGroup::Join(ReadFile(file), go).ValueOrThrow();
  }
  if (Status s = m->gloo->Connect(); !s.ok()) throw Error(s);
  GlooGroup* g = m->gloo.get();
  options->data_parallel = TrainOptions::DataParallel{
      a.rank, a.members,       [g](std::vector<float>& flat) { return g->AllReduceSum(flat); },
      true,   a.average_every, nullptr};
  return m;
}

}  // namespace burst
