// `burst train --members N --rank R --exchange ...`: one run spread over N
// processes (the runtime starts them as one job's gang: runtime/runtime_gangs.cpp).
//
//   --exchange store:URL    the storage channel (src/parallel/store_channel.h)
//                           on the store at URL (file:///shared/dir, s3://...),
//                           empty: a run started again (--resume) needs a
//                           fresh one, or it may read the last start's files
//   --exchange gloo:FILE    c10d Gloo (src/parallel/gloo_group.h): rank 0
//                           listens on --host and writes its address to FILE
//                           (a shared folder); the others wait for it there
//
// Thread-safety: one per process. Errors: burst::Error naming the flag.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "parallel/gloo_group.h"
#include "parallel/store_channel.h"
#include "store/object_store.h"
#include "train/trainer.h"

namespace burst {

struct MemberArgs {
  int members = 1;
  int rank = 0;
  std::string exchange;            // "store:URL" or "gloo:FILE"
  std::string host = "127.0.0.1";  // Gloo: the address the others reach this process at
  int64_t timeout_s = 600;
  int64_t average_every = 0;  // model averaging every K steps (0: gradients every step)
};

// What a member's exchange needs for as long as it trains: the store and
// its channel, or the Gloo group.
struct Members {
  std::unique_ptr<ObjectStore> store;
  std::optional<StoreChannel> channel;
  std::unique_ptr<GlooGroup> gloo;
};

// Connects this process to its members (Gloo: waits for all of them) and
// sets options->data_parallel; nullptr and nothing set for --members 1.
std::unique_ptr<Members> JoinMembers(const MemberArgs& args, TrainOptions* options);

}  // namespace burst
