// Safetensors headers, parsed and checked without libtorch.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {..}},
// then the raw data. This parser checks everything a reader will trust
// before it touches the data: the length against the file size, the JSON
// (nesting capped as everywhere in Burst), every entry's types, its dtype,
// its shape (no product that overflows), and its byte range against the
// data section and against shape x element size. model/safetensors.h builds
// tensors from what it returns; the fuzz target feeds it arbitrary bytes.
//
// Thread-safety: stateless functions. Errors: throw burst::Error with code
// kDataLoss, `file` as param, and a message naming the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace burst {

// Safetensors caps the header at 100 MB; a larger value means a corrupt file.
constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "BF16", ...
  size_t element_bytes = 0;
  std::vector<int64_t> shape;
  uint64_t numel = 0;
  uint64_t begin = 0, end = 0;  // byte range within the data section
};

struct SafetensorsHeader {
  uint64_t data_start = 0;                // 8 + N: the data section's offset in the file
  uint64_t data_size = 0;                 // file size - data_start
  std::vector<SafetensorsEntry> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
};

// Element size of a dtype Burst reads (F32, F16, BF16, F64, I64, I32, I16,
// I8, U8, BOOL); 0 when unknown.
size_t SafetensorsElementBytes(std::string_view dtype);

// N from the file's first 8 bytes (`prefix` must hold at least 8), checked
// against the cap and against file_size.
uint64_t SafetensorsHeaderLength(std::string_view prefix, uint64_t file_size, const std::string& file);

// The N bytes of header JSON of a file of file_size bytes.
SafetensorsHeader ParseSafetensorsHeader(std::string_view header_json, uint64_t file_size,
                                         const std::string& file);

// Both steps over a whole file held in memory.
SafetensorsHeader ParseSafetensorsBytes(std::string_view bytes, const std::string& file);

}  // namespace burst
