// A worker's sampling calls, decoded together (continuous batching).
//
// The first call a lease hands over starts a BatchDecoder on its weights.
// While the batch decodes, a thread asks the control plane every ~10 ms
// for calls that joined it (sample_join: the runtime routes calls of the
// same organisation on the same weights to a worker already decoding them,
// up to its batch size), and each joins the decoder at the next step. Each
// call is answered as soon as its own samples are done, from a thread that
// posts answers (the decoding thread goes on meanwhile); the loop returns
// when no call is left and every answer is posted.
//
// The streamed calls' pieces go from one thread, every call's in one post
// (sample_chunks with "calls"): batched for at most 20 ms, and at least
// every 250 ms while a call runs (an empty list is a keep-alive), so a
// caller that went away is learnt within a quarter of a second from the
// answer (its call named in "stop": cancelled, or no longer this worker's)
// and that call alone stops before its next token. Then the answer, after
// the call's last pieces: the result, or the error; a cancelled call
// answers {code: "cancelled"} with what it sampled until then, which is
// what is billed. A line on stderr per batch says how many calls it served
// and where its time went.
//
// Thread-safety: runs on the worker's main thread (plus the joining,
// streaming and answering threads above, each with its own connection).
// Errors: a call whose task is bad, or whose model fails to load, is
// answered with the error; a failure of the decoder itself answers every
// call in the batch, and every call handed to it, with it.
#pragma once

#include "core/json.h"
#include "worker/control_plane.h"
#include "worker/samplers.h"
#include "worker/worker.h"

namespace burst {

void RunSampleCalls(ControlPlane& cp, const WorkerConfig& cfg, const Json& first_task, Samplers& samplers);

}  // namespace burst
