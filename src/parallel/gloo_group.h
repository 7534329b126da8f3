// GlooGroup: the gradient exchange of one job's N workers that can reach
// each other: libtorch's c10d ProcessGroupGloo over TCP (CPU tensors), or
// its ProcessGroupNCCL (backend "nccl": CUDA tensors, for workers on GPUs),
// with the rendezvous on a c10d TCPStore that rank 0 serves.
//
// Rank 0 listens first (Listen: a port the system picks) and publishes
// address() (through the control plane, in its lease); every other member
// is given that address (Join). Connect then waits until all N are there;
// AllReduceSum sums a tensor across them in place, each member getting the
// same values. A member that never comes, or goes, makes the others fail
// within the timeout (kUnavailable, saying what was waited for), never
// hang.
//
// Thread-safety: one GlooGroup per member, used by one thread. Errors:
// Status, never exceptions (c10d's are caught and worded).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace burst {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  int64_t timeout_ms = 600'000;  // rendezvous and each collective
  // The address the other members reach this one at (Gloo's own
  // connections; rank 0's rendezvous too).
  std::string host = "127.0.0.1";
  // "gloo", or "nccl": each member's tensors on its own current CUDA device
  // (a build without NCCL's headers, or a machine without CUDA, fails
  // Connect with kFailedPrecondition saying so).
  std::string backend = "gloo";
};

// Whether this build has c10d's NCCL group compiled in.
bool HasNccl();

class GlooGroup {
 public:
  ~GlooGroup();

  // Rank 0: serves the rendezvous on options.host, on a port the system picks.
  static Result<std::unique_ptr<GlooGroup>> Listen(const GlooOptions& options);
  // Rank 1..N-1: the address rank 0's address() gave ("host:port").
  static Result<std::unique_ptr<GlooGroup>> Join(const std::string& address, const GlooOptions& options);

  // Where the rendezvous is ("host:port"): what rank 0 publishes.
  const std::string& address() const { return address_; }

  // Waits until every member has connected.
  Status Connect();

  // Sums `t` (float32, contiguous; on the CPU for gloo, on the member's
  // CUDA device for nccl) across the members, in place.
  Status AllReduceSum(torch::Tensor& t);
  // The same for a vector (the trainer's flat gradients), in place.
  Status AllReduceSum(std::vector<float>& data);

 private:
  struct Impl;
  explicit GlooGroup(GlooOptions options);

  GlooOptions opt_;
  std::string address_;  // the rendezvous
  std::unique_ptr<Impl> impl_;
};

}  // namespace burst
