#include "cli/members.h"

#include <chrono>
#include <thread>

#include "core/fs.h"
#include "dist/gloo_group.h"
#include "dist/store_channel.h"
#include "store/object_store.h"

namespace burst {
namespace {

class StoreMembers : public Members {
 public:
  std::unique_ptr<ObjectStore> store;
  std::optional<StoreChannel> channel;
  int64_t next = 0;
};

class GlooMembers : public Members {
 public:
  std::unique_ptr<GlooGroup> group;
};

template <typename T>
T Must(Result<T> r) {
  if (!r.ok()) throw Error(r.status());
  return std::move(r.value());
}

}  // namespace

std::unique_ptr<Members> JoinMembers(const MemberArgs& a, TrainOptions* options) {
  if (a.members == 1 && a.exchange.empty()) return nullptr;
  if (a.members < 2) throw Error(Code::kInvalidArgument, "--members must be 2 or more with --exchange", "--members");
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
  if (kind == "store") {
    auto m = std::make_unique<StoreMembers>();
    m->store = Must(OpenObjectStore(where));
    m->channel.emplace(Must(StoreChannel::Open(m->store.get(), {"channel/", a.rank, a.members, timeout_ms})));
    StoreMembers* raw = m.get();
    options->data_parallel =
        TrainOptions::DataParallel{a.rank, a.members, [raw](int64_t, std::vector<float>& flat) {
                                     return raw->channel->AllReduceSum(raw->next++, flat);
                                   }};
    return m;
  }
  auto m = std::make_unique<GlooMembers>();
  GlooOptions go;
  go.rank = a.rank;
  go.size = a.members;
  go.timeout_ms = timeout_ms;
  go.host = a.host;
  const std::filesystem::path file = where;
  if (a.rank == 0) {
    m->group = Must(GlooGroup::Listen(go));
    WriteFileAtomic(file, m->group->address());
    std::fprintf(stderr, "burst: member 0 of %d, rendezvous at %s (written to %s)\n", a.members,
                 m->group->address().c_str(), file.string().c_str());
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!std::filesystem::exists(file)) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw Error(Code::kUnavailable,
                    "member 0 wrote no address to " + file.string() + " within " + std::to_string(a.timeout_s) + " s",
                    "--exchange");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    m->group = Must(GlooGroup::Join(ReadFile(file), go));
  }
  if (Status s = m->group->Connect(); !s.ok()) throw Error(s);
  GlooGroup* g = m->group.get();
  options->data_parallel =
      TrainOptions::DataParallel{a.rank, a.members, [g](int64_t, std::vector<float>& flat) {
                                   torch::Tensor t = torch::from_blob(flat.data(), {static_cast<int64_t>(flat.size())});
                                   return g->AllReduceSum(t);
                                 }};
  return m;
}

}  // namespace burst
