// A worker's side of one job on many workers: the task's
// "member" (docs/api.md, "Workers") says its rank, the gang's size and how
// gradients travel; JoinGang connects this worker to the others for one
// attempt and gives the trainer its all-reduce.
//
//   c10d    rank 0 serves a c10d rendezvous (GlooGroup::Listen) and
//           publishes its address through the control plane
//           (/internal/v1/rendezvous); the others wait for it there and
//           join. Connect waits for all of them. Workers on GPUs use
//           c10d's NCCL group and reduce their gradients on the device;
//           CPU workers use its Gloo group.
//   store   the storage channel (StoreChannel) under the attempt's channel
//           prefix in the store every worker shares; it gives up at once
//           when `lost` says the attempt was ended elsewhere.
//
// Thread-safety: one per attempt, used by the training thread. Errors:
// burst::Error (kUnavailable: a member that never came, or went).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/json.h"
#include "parallel/gloo_group.h"
#include "parallel/store_channel.h"
#include "store/object_store.h"
#include "train/trainer.h"
#include "worker/control_plane.h"

namespace burst {

struct Gang {
  int rank = 0, size = 1;
  std::string communication;  // "c10d" or "store"
  std::string channel;        // the store channel's prefix
  std::string address;        // c10d: the rendezvous
  double connect_s = 0;       // how long joining the others took
  int64_t average_every = 0;  // model averaging every K steps (0: gradients every step)
  std::unique_ptr<GlooGroup> gloo;
  bool nccl = false;  // gloo is c10d's NCCL group: gradients reduced on the GPU
  std::optional<StoreChannel> store_channel;
  ObjectStore* store = nullptr;

  // The trainer's all-reduce over this gang (every member writes no
  // checkpoints but rank 0).
  TrainOptions::DataParallel Options();
  // Rank 0, after training: removes what the store channel left.
  void Cleanup();
};

// The address the other members reach this worker at: BURST_WORKER_HOST if
// set, else 127.0.0.1 when the control plane (`urls`) is on this machine,
// else this machine's host name.
std::string GangHost(const std::string& urls);

// `member`: the task's "member" object; `body`: {job, attempt} for the
// control plane; `lost`: the attempt is over (stop waiting); `on_gpu`: this
// worker trains on its GPU (c10d: NCCL).
std::unique_ptr<Gang> JoinGang(const Json& member, ObjectStore& store, ControlPlane& cp, const Json& body,
                               const std::string& host, const std::function<bool()>& lost,
                               bool on_gpu = false);

}  // namespace burst
