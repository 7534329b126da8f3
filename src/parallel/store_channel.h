// StoreChannel: the gradient exchange of one job's N workers that share
// only an object store (LambdaML's storage channel, Jiang et
// al., SIGMOD 2021): ScatterReduce through the store, no connection between
// the workers.
//
// Each step, every member splits its vector into N partitions (partition j
// is elements [j*n/N, (j+1)*n/N)) and
//   1. puts partition j, for each j but its own, at
//      PREFIX/step-S/part-J/from-R;
//   2. waits for the N-1 others' copies of its own partition, sums the N
//      copies in rank order (0, 1, ..., N-1, its own in its place, float32),
//      and puts the sum at PREFIX/step-S/sum-R;
//   3. waits for the other N-1 sums and copies them into place.
// So every member ends with the same vector, bit for bit, whatever the
// order the files arrived in, and repeated runs give the same bits. The
// sums are the barrier: a member in step S knows that every member has read
// all of step S-2, and deletes what it wrote there.
//
// A member that never writes (gone, or stuck) makes the others fail after
// `timeout_ms` with kUnavailable naming the rank and the step, not
// hang; a file of the wrong size (a stale run under the same prefix, or
// members disagreeing on the vector's length) is kFailedPrecondition.
//
// Thread-safety: one StoreChannel per member, used by one thread; members
// may be threads of one process or processes on machines that share the
// store (file:// on a shared folder, s3://).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/object_store.h"

namespace burst {

struct StoreChannelOptions {
  std::string prefix;  // a store key prefix ending in '/', the job's channel: e.g. "orgs/o/jobs/j/channel/"
  int rank = 0;
  int size = 1;
  int64_t timeout_ms = 600'000;  // how long a member waits for another's file
};

class StoreChannel {
 public:
  // Checks the options (prefix a valid key prefix ending in '/', 0 <= rank
  // < size); kInvalidArgument naming the field.
  static Result<StoreChannel> Open(ObjectStore* store, StoreChannelOptions options);

  // Sums `data` across the members into `data`: the channel's next step
  // (its calls are numbered 0, 1, 2, ... on every member alike; every
  // member's vector has the same length). A failed step is not retried on
  // the same channel: its members start again on a fresh prefix.
  Status AllReduceSum(std::vector<float>& data);

  // Polled while waiting: true gives up at once (kCancelled): this
  // member's attempt was ended elsewhere, so the others are not coming.
  void set_abort(std::function<bool()> abort) { abort_ = std::move(abort); }

 private:
  StoreChannel(ObjectStore* store, StoreChannelOptions options) : store_(store), opt_(std::move(options)) {}
  std::string StepPrefix(int64_t step) const;
  // Waits for `key` to hold exactly `bytes` bytes and returns them.
  Result<std::string> Await(const std::string& key, size_t bytes, int from, int64_t step) const;

  ObjectStore* store_;
  StoreChannelOptions opt_;
  int64_t next_step_ = 0;
  std::function<bool()> abort_;
};

}  // namespace burst
