// A worker's sampling calls, decoded together (continuous batching).
//
// The first call a lease hands over starts a BatchDecoder on its weights.
// While the batch decodes, the worker asks the control plane every ~10 ms
// for calls that joined it (sample_join: the runtime routes calls of the
// same organisation on the same weights to a worker already decoding them,
// up to its batch size), and each joins the decoder at the next step. Each
// call is answered as soon as its own samples are done; the loop returns
// when no call is left.
//
// A streamed call sends its pieces from a thread of its own: batched for at
// most 20 ms, and at least every 250 ms while the call runs (an empty batch
// is a keep-alive), so a caller that went away is learnt within a quarter of
// a second from the answer ({"cancel": true}, or 409: the call is no longer
// this worker's) and that call alone stops before its next token. Then the
// answer: the result, or the error; a cancelled call answers {code:
// "cancelled"} with what it sampled until then, which is what is billed.
//
// Thread-safety: runs on the worker's main thread (plus one sender thread
// per streamed call). Errors: a call whose task is bad, or whose model fails
// to load, is answered with the error; a failure of the decoder itself
// answers every call in the batch with it.
#pragma once

#include "core/json.h"
#include "worker/control_plane.h"
#include "worker/samplers.h"
#include "worker/worker.h"

namespace burst {

void RunSampleCalls(ControlPlane& cp, const WorkerConfig& cfg, const Json& first_task, Samplers& samplers);

}  // namespace burst
