// Safetensors files: Hugging Face's tensor container, read and written here.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {..}},
// then the raw little-endian data. The header is parsed and every offset
// checked against the file size by safetensors_header.h (no libtorch), so a
// truncated or corrupt file is an error naming the file and the tensor,
// never a crash; this file builds tensors from the checked header.
//
// Thread-safety: stateless functions. Errors: throw burst::Error.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace burst {

using TensorMap = std::map<std::string, torch::Tensor>;
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Reads every tensor, keeping its stored dtype (F32, F16, BF16, F64, I64, I32,
// I8, U8, BOOL). Metadata goes to *metadata when given.
TensorMap ReadSafetensors(const std::filesystem::path& path,
                          std::map<std::string, std::string>* metadata = nullptr);

// Writes tensors (any device; copied to CPU, made contiguous) atomically.
void WriteSafetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The safetensors dtype name of a torch dtype ("F32"); throws if unsupported.
std::string SafetensorsDtypeName(torch::ScalarType dtype);

}  // namespace burst
