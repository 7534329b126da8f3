#include "parallel/gloo_group.h"

#include <chrono>
#include <exception>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef BURST_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace burst {

struct GlooGroup::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::Backend> group;
};

namespace {

Status Check(const GlooOptions& o) {
  if (o.size < 1) return Status(Code::kInvalidArgument, "size must be >= 1", "size");
  if (o.rank < 0 || o.rank >= o.size)
    return Status(Code::kInvalidArgument, "rank must be in [0, size)", "rank");
  if (o.timeout_ms < 1) return Status(Code::kInvalidArgument, "timeout_ms must be >= 1", "timeout_ms");
  if (o.host.empty()) return Status(Code::kInvalidArgument, "host is required", "host");
  if (o.backend != "gloo" && o.backend != "nccl")
    return Status(Code::kInvalidArgument, "backend must be gloo or nccl, not \"" + o.backend + "\"",
                  "backend");
  return Status();
}

// c10d reports by exception: a Status saying what was being done.
template <typename F>
Status Guard(const std::string& what, F&& fn) {
  try {
    fn();
    return Status();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);  // c10's trace follows
    return Status(Code::kUnavailable, what + ": " + msg);
  }
}

}  // namespace

bool HasNccl() {
#ifdef BURST_NCCL
  return true;
#else
  return false;
#endif
}

GlooGroup::GlooGroup(GlooOptions options) : opt_(std::move(options)) {}
GlooGroup::~GlooGroup() = default;

Result<std::unique_ptr<GlooGroup>> GlooGroup::Listen(const GlooOptions& options) {
  if (Status s = Check(options); !s.ok()) return s;
  if (options.rank != 0) return Status(Code::kInvalidArgument, "only rank 0 listens", "rank");
  std::unique_ptr<GlooGroup> g(new GlooGroup(options));
  g->impl_ = std::make_unique<Impl>();
  Status s = Guard("serving the rendezvous on " + options.host, [&] {
    c10d::TCPStoreOptions so;
    so.port = 0;  // the system's choice
    so.isServer = true;
    so.numWorkers = static_cast<size_t>(options.size);
    so.waitWorkers = false;  // Connect waits, within the timeout
    so.timeout = std::chrono::milliseconds(options.timeout_ms);
    g->impl_->store = c10::make_intrusive<c10d::TCPStore>(options.host, so);
    g->address_ = options.host + ":" + std::to_string(g->impl_->store->getPort());
  });
  if (!s.ok()) return s;
  return g;
}

Result<std::unique_ptr<GlooGroup>> GlooGroup::Join(const std::string& address, const GlooOptions& options) {
  if (Status s = Check(options); !s.ok()) return s;
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return Status(Code::kInvalidArgument, "address must be host:port, not " + address, "address");
  }
  for (size_t i = colon + 1; i < address.size(); ++i) {
    if (address[i] < '0' || address[i] > '9' || port > 65535) {
      return Status(Code::kInvalidArgument, "address must be host:port, not " + address, "address");
    }
    port = port * 10 + (address[i] - '0');
  }
  if (port < 1 || port > 65535)
    return Status(Code::kInvalidArgument, "port out of range in " + address, "address");
  std::unique_ptr<GlooGroup> g(new GlooGroup(options));
  g->impl_ = std::make_unique<Impl>();
  g->address_ = address;
  Status s = Guard("joining the rendezvous at " + address, [&] {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(port);
    so.isServer = false;
    so.timeout = std::chrono::milliseconds(options.timeout_ms);
    g->impl_->store = c10::make_intrusive<c10d::TCPStore>(address.substr(0, colon), so);
  });
  if (!s.ok()) return s;
  return g;
}

Status GlooGroup::Connect() {
  if (impl_->group) return Status();
  if (opt_.backend == "nccl") {
    if (!HasNccl()) {
      return Status(Code::kFailedPrecondition,
                    "this build has no NCCL group (NCCL's and CUDA's headers were missing when it was built)",
                    "backend");
    }
    if (!torch::cuda::is_available())
      return Status(Code::kFailedPrecondition, "the nccl backend needs a CUDA device; libtorch sees none",
                    "backend");
#ifdef BURST_NCCL
    return Guard("waiting for the " + std::to_string(opt_.size) + " members (NCCL) at " + address_, [&] {
      auto o = c10d::ProcessGroupNCCL::Options::create();
      o->timeout = std::chrono::milliseconds(opt_.timeout_ms);
      impl_->group = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, opt_.rank, opt_.size, o);
    });
#endif
  }
  return Guard("waiting for the " + std::to_string(opt_.size) + " members at " + address_, [&] {
    auto o = c10d::ProcessGroupGloo::Options::create(std::chrono::milliseconds(opt_.timeout_ms));
    o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(opt_.host));
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, opt_.rank, opt_.size, o);
  });
}

Status GlooGroup::AllReduceSum(torch::Tensor& t) {
  if (!impl_->group) return Status(Code::kFailedPrecondition, "Connect first");
  const bool nccl = opt_.backend == "nccl";
  if ((nccl ? !t.device().is_cuda() : !t.device().is_cpu()) || t.scalar_type() != torch::kFloat32 ||
      !t.is_contiguous()) {
    return Status(Code::kInvalidArgument, std::string("AllReduceSum takes a contiguous float32 ") +
                                              (nccl ? "CUDA" : "CPU") + " tensor (backend " + opt_.backend +
                                              ")");
  }
  return Guard("all-reducing " + std::to_string(t.numel()) + " values among " + std::to_string(opt_.size),
               [&] {
                 std::vector<at::Tensor> ts = {t};
                 auto work = impl_->group->allreduce(ts);
                 work->wait(std::chrono::milliseconds(opt_.timeout_ms));
               });
}

Status GlooGroup::AllReduceSum(std::vector<float>& data) {
  torch::Tensor t = torch::from_blob(data.data(), {static_cast<int64_t>(data.size())}, torch::kFloat32);
  if (opt_.backend != "nccl") return AllReduceSum(t);
  torch::Tensor on_gpu = t.to(torch::kCUDA);  // NCCL reduces device memory only
  if (Status s = AllReduceSum(on_gpu); !s.ok()) return s;
  t.copy_(on_gpu.cpu());
  return Status();
}

}  // namespace burst
