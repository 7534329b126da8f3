#include "model/safetensors_header.h"

#include "core/json.h"
#include "core/status.h"

namespace burst {
namespace {

struct DtypeSize {
  const char* name;
  size_t bytes;
};

constexpr DtypeSize kDtypeSizes[] = {
    {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I64", 8},
    {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U8", 1},  {"BOOL", 1},
};

Error Corrupt(const std::string& file, const std::string& why) {
  return Error(Code::kDataLoss, file + ": not a valid safetensors file: " + why, file);
}

SafetensorsEntry ParseEntry(const std::string& name, const Json& info, uint64_t data_size,
                            const std::string& file) {
  auto bad = [&](const std::string& why) { return Corrupt(file, "tensor " + name + " " + why); };
  if (!info.is_object()) throw bad("is not an object");
  auto dtype = info.find("dtype"), shape = info.find("shape"), offsets = info.find("data_offsets");
  if (dtype == info.end() || shape == info.end() || offsets == info.end())
    throw bad("lacks dtype, shape or data_offsets");
  SafetensorsEntry e;
  e.name = name;
  if (!dtype->is_string()) throw bad("has a dtype that is not a string: " + JsonPreview(*dtype));
  e.dtype = dtype->get<std::string>();
  e.element_bytes = SafetensorsElementBytes(e.dtype);
  if (e.element_bytes == 0) throw bad("has unsupported dtype " + JsonPreview(*dtype));
  if (!shape->is_array()) throw bad("has a shape that is not a list: " + JsonPreview(*shape));
  e.numel = 1;
  for (const Json& d : *shape) {
    // Non-negative integers parse as unsigned; anything else is corrupt.
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t{INT64_MAX})
      throw bad("has a bad shape " + JsonPreview(*shape));
    const uint64_t dim = d.get<uint64_t>();
    e.shape.push_back(static_cast<int64_t>(dim));
    // A product that wraps could match a small byte range and then make the
    // reader allocate the true, enormous, shape.
    if (__builtin_mul_overflow(e.numel, dim, &e.numel))
      throw bad("has a shape whose size overflows: " + JsonPreview(*shape));
  }
  if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    throw bad("has bad data_offsets " + JsonPreview(*offsets) + " (two byte offsets expected)");
  }
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size) {
    throw bad("data [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
              ") lies beyond the file's " + std::to_string(data_size) + " data bytes (truncated?)");
  }
  uint64_t need = 0;
  if (__builtin_mul_overflow(e.numel, uint64_t{e.element_bytes}, &need) || need != e.end - e.begin) {
    throw bad("has " + std::to_string(e.end - e.begin) + " bytes but its shape " + JsonPreview(*shape) +
              " of " + e.dtype + " needs another size");
  }
  return e;
}

}  // namespace

size_t SafetensorsElementBytes(std::string_view dtype) {
  for (const auto& d : kDtypeSizes)
    if (dtype == d.name) return d.bytes;
  return 0;
}

uint64_t SafetensorsHeaderLength(std::string_view prefix, uint64_t file_size, const std::string& file) {
  if (prefix.size() < 8 || file_size < 8) throw Corrupt(file, "shorter than its 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(prefix[static_cast<size_t>(i)]);
  if (n > kMaxSafetensorsHeader || n > file_size - 8) {
    throw Corrupt(file, "header length " + std::to_string(n) + " exceeds the file size " +
                            std::to_string(file_size) + " (truncated?)");
  }
  return n;
}

SafetensorsHeader ParseSafetensorsHeader(std::string_view header_json, uint64_t file_size,
                                         const std::string& file) {
  SafetensorsHeader out;
  out.data_start = 8 + header_json.size();
  if (out.data_start > file_size) throw Corrupt(file, "header runs past the end of the file");
  out.data_size = file_size - out.data_start;
  Json header;
  try {
    header = ParseJson(std::string(header_json), file);
  } catch (const Error& e) {
    throw Corrupt(file, "header is not JSON: " + e.status().message());
  }
  if (!header.is_object()) throw Corrupt(file, "header is not a JSON object");
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      // Burst reads string metadata only; other values are skipped rather
      // than refused, so files from writers with richer metadata still load.
      if (it->is_object()) {
        for (auto m = it->begin(); m != it->end(); ++m)
          if (m->is_string()) out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    out.tensors.push_back(ParseEntry(it.key(), *it, out.data_size, file));
  }
  return out;
}

SafetensorsHeader ParseSafetensorsBytes(std::string_view bytes, const std::string& file) {
  const uint64_t n = SafetensorsHeaderLength(bytes, bytes.size(), file);
  return ParseSafetensorsHeader(bytes.substr(8, n), bytes.size(), file);
}

}  // namespace burst
