// GGUF (version 3), the file llama.cpp and Ollama load: a writer of its
// metadata and tensors, with the three tensor types `burst export --gguf`
// offers (f32, f16, q8_0) encoded as ggml does. No libtorch: the engine
// hands it float32 arrays (model/gguf_export.cpp says which and how named).
//
// Layout: "GGUF", version, tensor count, metadata count; each metadata key
// (a length-prefixed string), its type and value; each tensor's name, dims
// (innermost first), type and offset; padding to general.alignment (32);
// then each tensor's bytes, each padded to the alignment.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/status.h"

namespace burst::gguf {

// ggml_type values.
enum class TensorType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8 };

// The metadata value types Burst writes (GGUF's UINT32, INT32, FLOAT32,
// BOOL, STRING and ARRAY of STRING, FLOAT32, INT32).
using Value = std::variant<uint32_t, int32_t, float, bool, std::string, std::vector<std::string>,
                           std::vector<float>, std::vector<int32_t>>;

inline constexpr uint32_t kAlignment = 32;
inline constexpr int64_t kQ8Block = 32;       // values per q8_0 block
inline constexpr int64_t kQ8Bytes = 34;       // an f16 scale and 32 int8
inline constexpr size_t kMaxNameLength = 63;  // GGML_MAX_NAME less its NUL

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;   // outermost first, as torch and safetensors say it
  const float* data = nullptr;  // shape's product of values, row-major; kept alive by the caller until Write
  TensorType type = TensorType::kF32;
};

class Writer {
 public:
  // Sets a metadata key (replacing an earlier value); keys keep their order.
  void Set(const std::string& key, Value value);
  // A tensor to write. Errors (kInvalidArgument, naming the tensor): an
  // empty or too long or repeated name, a non-positive dim, no data, or
  // q8_0 for a tensor whose innermost dim is not a multiple of 32.
  Status AddTensor(Tensor t);
  // Writes the whole file at `path` (a temporary beside it, then renamed:
  // a failed write leaves nothing there).
  Status Write(const std::filesystem::path& path) const;

  size_t tensor_count() const { return tensors_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> meta_;
  std::vector<Tensor> tensors_;
};

// IEEE half from float, rounding to nearest even (as F16C does), and back.
uint16_t F32ToF16(float f);
float F16ToF32(uint16_t h);
// n values (a multiple of 32) as q8_0 blocks into out (n / 32 * 34 bytes),
// exactly as ggml's quantize_row_q8_0_ref.
void QuantizeQ8_0(const float* x, int64_t n, uint8_t* out);
// Bytes of n values of a type (n a multiple of 32 for q8_0).
int64_t TensorBytes(TensorType type, int64_t n);

}  // namespace burst::gguf
