#include "model/gguf.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>

#include "core/fs.h"

namespace burst::gguf {
namespace {

// GGUF's metadata value types.
enum : uint32_t { kU32 = 4, kI32 = 5, kF32v = 6, kBool = 7, kString = 8, kArray = 9 };

// Little-endian bytes (GGUF's byte order; the hosts Burst runs on are little-endian).
class Bytes {
 public:
  template <typename T>
  void Put(T v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void Str(const std::string& s) {
    Put<uint64_t>(s.size());
    out_ += s;
  }
  void PadTo(uint64_t alignment) { out_.resize((out_.size() + alignment - 1) / alignment * alignment, '\0'); }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

void PutValue(Bytes& b, const Value& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, uint32_t>) {
          b.Put<uint32_t>(kU32), b.Put<uint32_t>(x);
        } else if constexpr (std::is_same_v<T, int32_t>) {
          b.Put<uint32_t>(kI32), b.Put<int32_t>(x);
        } else if constexpr (std::is_same_v<T, float>) {
          b.Put<uint32_t>(kF32v), b.Put<float>(x);
        } else if constexpr (std::is_same_v<T, bool>) {
          b.Put<uint32_t>(kBool), b.Put<uint8_t>(x ? 1 : 0);
        } else if constexpr (std::is_same_v<T, std::string>) {
          b.Put<uint32_t>(kString), b.Str(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          b.Put<uint32_t>(kArray), b.Put<uint32_t>(kString), b.Put<uint64_t>(x.size());
          for (const auto& s : x) b.Str(s);
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          b.Put<uint32_t>(kArray), b.Put<uint32_t>(kF32v), b.Put<uint64_t>(x.size());
          for (float f : x) b.Put<float>(f);
        } else {
          b.Put<uint32_t>(kArray), b.Put<uint32_t>(kI32), b.Put<uint64_t>(x.size());
          for (int32_t i : x) b.Put<int32_t>(i);
        }
      },
      v);
}

int64_t Count(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

uint64_t Align(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// One tensor's bytes in its type.
std::string Encode(const Tensor& t) {
  const int64_t n = Count(t);
  std::string out(static_cast<size_t>(TensorBytes(t.type, n)), '\0');
  switch (t.type) {
    case TensorType::kF32:
      std::memcpy(out.data(), t.data, out.size());
      break;
    case TensorType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToF16(t.data[i]);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      break;
    case TensorType::kQ8_0:
      QuantizeQ8_0(t.data, n, reinterpret_cast<uint8_t*>(out.data()));
      break;
  }
  return out;
}

class File {
 public:
  explicit File(const std::filesystem::path& tmp) : tmp_(tmp) {
    fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd_ < 0) status_ = IoStatus(errno, "cannot create", tmp, Code::kInternal);
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  Status Append(std::string_view data) {
    while (status_.ok() && !data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return status_ = IoStatus(errno, "cannot write", tmp_, Code::kInternal);
      data.remove_prefix(static_cast<size_t>(n));
    }
    return status_;
  }
  Status Commit(const std::filesystem::path& path) {
    if (!status_.ok()) return status_;
    const int synced = ::fsync(fd_) == 0 || errno == EINVAL ? 0 : errno;
    const int closed = ::close(fd_) == 0 ? 0 : errno;
    fd_ = -1;
    if (synced != 0 || closed != 0)
      return IoStatus(synced ? synced : closed, "cannot write", tmp_, Code::kInternal);
    std::error_code ec;
    std::filesystem::rename(tmp_, path, ec);
    if (ec)
      return Status(Code::kInternal, "cannot rename into " + path.string() + ": " + ec.message(),
                    path.string());
    committed_ = true;
    return Status();
  }
  const Status& status() const { return status_; }

 private:
  std::filesystem::path tmp_;
  int fd_ = -1;
  bool committed_ = false;
  Status status_;
};

}  // namespace

uint16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xffu);
  if (exp == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));  // inf, NaN
  const int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // beyond 65504: inf
  if (e <= 0) {                                                 // a half subnormal, or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))
    ++half;  // a carry into the exponent is right, up to inf
  return static_cast<uint16_t>(sign | half);
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 0x1f) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}

void QuantizeQ8_0(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / kQ8Block; ++b) {
    const float* v = x + b * kQ8Block;
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(v[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* block = out + b * kQ8Bytes;
    const uint16_t dh = F32ToF16(d);
    std::memcpy(block, &dh, 2);
    for (int64_t j = 0; j < kQ8Block; ++j) {
      const auto q = static_cast<int8_t>(std::roundf(v[j] * id));
      std::memcpy(block + 2 + j, &q, 1);
    }
  }
}

int64_t TensorBytes(TensorType type, int64_t n) {
  switch (type) {
    case TensorType::kF32:
      return 4 * n;
    case TensorType::kF16:
      return 2 * n;
    case TensorType::kQ8_0:
      return n / kQ8Block * kQ8Bytes;
  }
  return 0;
}

void Writer::Set(const std::string& key, Value value) {
  for (auto& [k, v] : meta_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  meta_.emplace_back(key, std::move(value));
}

Status Writer::AddTensor(Tensor t) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "gguf tensor \"" + t.name + "\": " + why, t.name);
  };
  if (t.name.empty() || t.name.size() > kMaxNameLength) return bad("a name of 1 to 63 bytes is needed");
  for (const Tensor& other : tensors_)
    if (other.name == t.name) return bad("added twice");
  if (t.shape.empty() || t.shape.size() > 4) return bad("1 to 4 dims are needed");
  for (int64_t d : t.shape)
    if (d <= 0) return bad("a dim is not positive");
  if (t.data == nullptr) return bad("no data");
  if (t.type == TensorType::kQ8_0 && t.shape.back() % kQ8Block != 0) {
    return bad("q8_0 needs an innermost dim divisible by 32, not " + std::to_string(t.shape.back()));
  }
  tensors_.push_back(std::move(t));
  return Status();
}

Status Writer::Write(const std::filesystem::path& path) const {
  Bytes head;
  head.Put<uint32_t>(0x46554747u);  // "GGUF"
  head.Put<uint32_t>(3);
  head.Put<uint64_t>(tensors_.size());
  head.Put<uint64_t>(meta_.size());
  for (const auto& [key, value] : meta_) {
    head.Str(key);
    PutValue(head, value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    head.Str(t.name);
    head.Put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it)
      head.Put<uint64_t>(static_cast<uint64_t>(*it));
    head.Put<uint32_t>(static_cast<uint32_t>(t.type));
    head.Put<uint64_t>(offset);
    offset = Align(offset + static_cast<uint64_t>(TensorBytes(t.type, Count(t))));
  }
  head.PadTo(kAlignment);

  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  File file(tmp);
  if (Status s = file.Append(head.str()); !s.ok()) return s;
  for (const Tensor& t : tensors_) {
    std::string data = Encode(t);
    data.resize(Align(data.size()), '\0');
    if (Status s = file.Append(data); !s.ok()) return s;
  }
  return file.Commit(path);
}

}  // namespace burst::gguf
