#include "worker/gang.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace burst {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

std::string GangHost(const std::string& urls) {
  if (const char* h = std::getenv("BURST_WORKER_HOST"); h != nullptr && *h != '\0') return h;
  for (const char* local : {"://127.0.0.1", "://localhost", "://[::1]"})
    if (urls.find(local) != std::string::npos) return "127.0.0.1";
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "127.0.0.1";
  return name;
}

TrainOptions::DataParallel Gang::Options() {
  TrainOptions::DataParallel dp;
  dp.rank = rank;
  dp.size = size;
  dp.average_every = average_every;
  if (gloo) {
    GlooGroup* g = gloo.get();
    dp.all_reduce = [g](std::vector<float>& flat) { return g->AllReduceSum(flat); };
    if (nccl) dp.all_reduce_device = [g](torch::Tensor& flat) { return g->AllReduceSum(flat); };
  } else {
    StoreChannel* ch = &*store_channel;
    dp.all_reduce = [ch](std::vector<float>& flat) { return ch->AllReduceSum(flat); };
  }
  return dp;
}

void Gang::Cleanup() {
  if (rank != 0 || !store_channel || store == nullptr) return;
  if (Status s = store->DeletePrefix(channel); !s.ok()) {
    std::fprintf(stderr, "%s burst worker: cannot remove the gradient channel %s (left in the store): %s\n",
                 LogStamp().c_str(), channel.c_str(), s.ToString().c_str());
  }
}

std::unique_ptr<Gang> JoinGang(const Json& member, ObjectStore& store, ControlPlane& cp, const Json& body,
                               const std::string& host, const std::function<bool()>& lost, bool on_gpu) {
  auto g = std::make_unique<Gang>();
  g->rank = member.at("rank").get<int>();
  g->size = member.at("size").get<int>();
  g->communication = member.value("communication", "store");
  g->channel = member.value("channel", "");
  g->store = &store;
  g->average_every = member.value("average_every", int64_t{0});
  const int64_t timeout_ms = static_cast<int64_t>(member.value("timeout_s", 120.0) * 1000);
  const auto t0 = Clock::now();
  if (g->communication == "store") {
    g->store_channel.emplace(
        StoreChannel::Open(&store, {g->channel, g->rank, g->size, timeout_ms}).ValueOrThrow());
    g->store_channel->set_abort(lost);
    return g;  // nothing to wait for before the first exchange
  }
  if (g->communication != "c10d") {
    throw Error(Code::kInvalidArgument, "unknown communication \"" + g->communication + "\"",
                "communication");
  }
  GlooOptions go;
  go.rank = g->rank;
  go.size = g->size;
  go.timeout_ms = timeout_ms;
  go.host = host;
  go.backend = on_gpu ? "nccl" : "gloo";
  g->nccl = on_gpu;
  if (g->rank == 0) {
    g->gloo = GlooGroup::Listen(go).ValueOrThrow();
    g->address = g->gloo->address();
    Json b = body;
    b["address"] = g->address;
    Reply r = cp.PostRetrying("rendezvous", b);
    if (r.status == 409) throw Error(Code::kCancelled, "the attempt ended before its rendezvous", "attempt");
    if (r.status != 200) throw Error(Code::kUnavailable, "cannot publish the rendezvous address: " + r.error);
  } else {
    const auto deadline = t0 + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      Json b = body;
      b["wait_ms"] = 10'000;
      Reply r = cp.Post("rendezvous", b);
      if (r.status == 409 || lost()) {
        throw Error(Code::kCancelled, "the attempt ended before its rendezvous", "attempt");
      }
      if (r.status == 200 && r.body.value("address", Json()).is_string()) {
        g->address = r.body["address"].get<std::string>();
        break;
      }
      if (Clock::now() > deadline) {
        throw Error(Code::kUnavailable,
                    "rank 0 published no rendezvous address within " + std::to_string(timeout_ms / 1000) +
                        " s" + (r.status == 200 ? "" : " (the control plane said: " + r.error + ")"));
      }
      if (r.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    g->gloo = GlooGroup::Join(g->address, go).ValueOrThrow();
  }
  if (Status s = g->gloo->Connect(); !s.ok()) throw Error(s);
  g->connect_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return g;
}

}  // namespace burst
