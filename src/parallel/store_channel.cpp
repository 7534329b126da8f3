#include "parallel/store_channel.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>

namespace burst {
namespace {

using Clock = std::chrono::steady_clock;

// Partition j of n elements among `size`: [Begin(j), Begin(j + 1)).
size_t Begin(size_t n, int j, int size) {
  return static_cast<size_t>(static_cast<unsigned long long>(n) * static_cast<unsigned>(j) /
                             static_cast<unsigned>(size));
}

std::string_view Bytes(const float* p, size_t count) {
  return {reinterpret_cast<const char*>(p), count * sizeof(float)};
}

std::string Pad(int64_t v, int width) {
  std::string s = std::to_string(v);
  return std::string(static_cast<size_t>(std::max(0, width - static_cast<int>(s.size()))), '0') + s;
}

}  // namespace

Result<StoreChannel> StoreChannel::Open(ObjectStore* store, StoreChannelOptions options) {
  if (store == nullptr) return Status(Code::kInvalidArgument, "a store is required", "store");
  if (options.prefix.empty() || options.prefix.back() != '/') {
    return Status(Code::kInvalidArgument, "prefix must end in '/'", "prefix");
  }
  if (Status s = ValidateKey(std::string_view(options.prefix).substr(0, options.prefix.size() - 1), "prefix");
      !s.ok()) {
    return s;
  }
  if (options.size < 1) return Status(Code::kInvalidArgument, "size must be >= 1", "size");
  if (options.rank < 0 || options.rank >= options.size) {
    return Status(Code::kInvalidArgument, "rank must be in [0, size)", "rank");
  }
  if (options.timeout_ms < 1) return Status(Code::kInvalidArgument, "timeout_ms must be >= 1", "timeout_ms");
  return StoreChannel(store, std::move(options));
}

std::string StoreChannel::StepPrefix(int64_t step) const {
  return opt_.prefix + "step-" + Pad(step, 8) + "/";
}

Result<std::string> StoreChannel::Await(const std::string& key, size_t bytes, int from, int64_t step) const {
  const auto deadline = Clock::now() + std::chrono::milliseconds(opt_.timeout_ms);
  auto pause = std::chrono::microseconds(500);
  Status last;
  for (;;) {
    Result<std::string> r = store_->Get(key);
    if (r.ok()) {
      if (r.value().size() != bytes) {
        return Status(Code::kFailedPrecondition,
                      key + " holds " + std::to_string(r.value().size()) + " bytes, not " +
                          std::to_string(bytes) +
                          ": the members disagree on the gradient's size, or an earlier run left it");
      }
      return r;
    }
    // Missing: not written yet. Anything else (an S3 hiccup): tried again
    // until the deadline, then reported.
    if (r.status().code() != Code::kNotFound) last = r.status();
    if (abort_ && abort_()) {
      return Status(Code::kCancelled, "stopped waiting for rank " + std::to_string(from) + " in step " +
                                          std::to_string(step) + ": this member's attempt is over");
    }
    if (Clock::now() >= deadline) {
      std::string why = "rank " + std::to_string(from) + " wrote nothing for step " + std::to_string(step) +
                        " within " + std::to_string(opt_.timeout_ms) + " ms (" + key + ")";
      if (!last.ok()) why += "; the store last said: " + last.ToString();
      return Status(Code::kUnavailable, why);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20'000));
  }
}

Status StoreChannel::AllReduceSum(std::vector<float>& data) {
  const int64_t step = next_step_;
  const int size = opt_.size, rank = opt_.rank;
  const size_t n = data.size();
  const std::string at = StepPrefix(step);
  auto part_key = [&](int part, int from) { return at + "part-" + Pad(part, 4) + "/from-" + Pad(from, 4); };
  auto sum_key = [&](int part) { return at + "sum-" + Pad(part, 4); };
  if (size > 1) {
    // 1. Every other member's partition, to it.
    for (int j = 0; j < size; ++j) {
      if (j == rank) continue;
      const size_t b = Begin(n, j, size), e = Begin(n, j + 1, size);
      if (Status s = store_->Put(part_key(j, rank), Bytes(data.data() + b, e - b)); !s.ok()) return s;
    }
    // 2. This member's partition: the N copies summed in rank order.
    const size_t b = Begin(n, rank, size), e = Begin(n, rank + 1, size), len = e - b;
    std::vector<float> sum(len, 0.0f), part(len);
    for (int r = 0; r < size; ++r) {
      const float* src = data.data() + b;
      if (r != rank) {
        Result<std::string> got = Await(part_key(rank, r), len * sizeof(float), r, step);
        if (!got.ok()) return got.status();
        // (An empty partition's data() may be null.)
        if (len > 0) std::memcpy(part.data(), got.value().data(), len * sizeof(float));
        src = part.data();
      }
      for (size_t i = 0; i < len; ++i) sum[i] += src[i];
    }
    if (Status s = store_->Put(sum_key(rank), Bytes(sum.data(), len)); !s.ok()) return s;
    std::copy(sum.begin(), sum.end(), data.begin() + static_cast<std::ptrdiff_t>(b));
    // 3. The others' sums, into place.
    for (int j = 0; j < size; ++j) {
      if (j == rank) continue;
      const size_t jb = Begin(n, j, size), je = Begin(n, j + 1, size);
      Result<std::string> got = Await(sum_key(j), (je - jb) * sizeof(float), j, step);
      if (!got.ok()) return got.status();
      if (je > jb) std::memcpy(data.data() + jb, got.value().data(), (je - jb) * sizeof(float));
    }
    // Every member has read all of step - 2 (each wrote its sum of step - 1,
    // which it did after finishing step - 2): what this one wrote there goes.
    if (step >= 2) {
      const std::string old = StepPrefix(step - 2);
      for (int j = 0; j < size; ++j) {
        const std::string key =
            j == rank ? old + "sum-" + Pad(j, 4) : old + "part-" + Pad(j, 4) + "/from-" + Pad(rank, 4);
        if (Status s = store_->Delete(key); !s.ok()) return s;
      }
    }
  }
  ++next_step_;
  return Status();
}

}  // namespace burst
