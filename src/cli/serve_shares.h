// `burst serve`'s per-organisation shares: what one organisation may hold
// of the server at once (request threads, bytes of request bodies and of
// training-loop requests, stored bytes, live loop runs and sessions,
// sampling calls and workers, slots held by deployments), as flags with
// BURST_* fallbacks, checked and applied to the server's options.
//
// Thread-safety: called on the main thread while serve starts.
#pragma once

#include <cstdint>
#include <string>

#include "api/server.h"
#include "runtime/runtime.h"

namespace CLI {
class App;
}

namespace burst {

struct ShareArgs {
  int requests = 16;          // running at once
  int64_t body_mb = 64;       // request bodies in memory
  std::string storage = "0";  // stored bytes ("0": no quota), with a unit: 500G, 2T
  int loop_runs = 32, loop_sessions = 64;
  int64_t loop_mb = 64;
  int sampling_workers = -1;  // -1: half the slots, at least one
  int min_replicas = -1;      // -1: half the slots
  int max_idle_per_address = 16;
  double key_max_rps = 0;  // requests a second per API key (0: no limit)
};

void AddShareOptions(CLI::App& cmd, ShareArgs* args);

// Checks the values (kInvalidArgument naming the flag) and sets them in the
// options; slots must already be set in `ro`.
void ApplyShares(const ShareArgs& a, ServerOptions& opt, RuntimeOptions& ro);

// "500G", "2T", "1048576", "64MiB": bytes; kInvalidArgument naming `flag`.
int64_t ParseBytes(const std::string& text, const std::string& flag);

}  // namespace burst
