#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"

namespace burst {
namespace {

struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
  size_t bytes;
};

constexpr DtypeInfo kDtypes[] = {
    {"F32", torch::kFloat32, 4}, {"F16", torch::kFloat16, 2}, {"BF16", torch::kBFloat16, 2},
    {"F64", torch::kFloat64, 8}, {"I64", torch::kInt64, 8},   {"I32", torch::kInt32, 4},
    {"I16", torch::kInt16, 2},   {"I8", torch::kInt8, 1},     {"U8", torch::kUInt8, 1},
    {"BOOL", torch::kBool, 1},
};

const DtypeInfo* FindDtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

// Safetensors caps the header at 100 MB; a larger value means a corrupt file.
constexpr uint64_t kMaxHeader = 100ull << 20;

}  // namespace

std::string SafetensorsDtypeName(torch::ScalarType dtype) {
  for (const auto& d : kDtypes)
    if (d.type == dtype) return d.name;
  throw Error(Code::kInvalidArgument,
              std::string("dtype not storable in safetensors: ") + c10::toString(dtype));
}

TensorMap ReadSafetensors(const std::filesystem::path& path,
                          std::map<std::string, std::string>* metadata) {
  const std::string file = path.string();
  // Tensors are read straight into their own buffers (pread), so loading
  // never holds the file twice in memory.
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error(Code::kNotFound, "cannot open " + file, file);
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  ::fstat(fd, &st);
  const size_t file_size = static_cast<size_t>(st.st_size);
  auto corrupt = [&](const std::string& why) {
    return Error(Code::kDataLoss, file + ": not a valid safetensors file: " + why, file);
  };
  auto read_at = [&](void* dst, size_t len, size_t off) {
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::pread(fd, static_cast<char*>(dst) + done, len - done, static_cast<off_t>(off + done));
      if (n <= 0) throw corrupt("short read at byte " + std::to_string(off + done));
      done += static_cast<size_t>(n);
    }
  };
  if (file_size < 8) throw corrupt("shorter than its 8-byte header length");
  unsigned char len_bytes[8];
  read_at(len_bytes, 8, 0);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > kMaxHeader || 8 + header_len > file_size) {
    throw corrupt("header length " + std::to_string(header_len) + " exceeds the file size " +
                  std::to_string(file_size) + " (truncated?)");
  }
  std::string header_text(header_len, '\0');
  read_at(header_text.data(), header_len, 8);
  Json header;
  try {
    header = Json::parse(header_text);
  } catch (const std::exception& e) {
    throw corrupt(std::string("header is not JSON: ") + e.what());
  }
  if (!header.is_object()) throw corrupt("header is not a JSON object");
  const size_t base = 8 + header_len;
  const size_t body = file_size - base;
  TensorMap out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (metadata && it->is_object()) {
        for (auto m = it->begin(); m != it->end(); ++m)
          if (m->is_string()) (*metadata)[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const std::string& name = it.key();
    const Json& info = *it;
    // Wrong JSON types in an entry are corruption too, not a crash.
    try {
      if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
          !info.contains("data_offsets")) {
        throw corrupt("tensor " + name + " lacks dtype, shape or data_offsets");
      }
      const DtypeInfo* dt = FindDtype(info["dtype"].get<std::string>());
      if (!dt) throw corrupt("tensor " + name + " has unsupported dtype " + info["dtype"].dump());
      std::vector<int64_t> shape;
      size_t numel = 1;
      for (const auto& d : info["shape"]) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t{1} << 40))
          throw corrupt("bad shape of " + name);
        shape.push_back(d.get<int64_t>());
        if (numel > (size_t{1} << 40)) throw corrupt("shape of " + name + " is implausibly large");
        numel *= static_cast<size_t>(d.get<int64_t>());
      }
      const auto& off = info["data_offsets"];
      if (!off.is_array() || off.size() != 2) throw corrupt("bad data_offsets of " + name);
      size_t begin = off[0].get<size_t>(), end = off[1].get<size_t>();
      if (begin > end || end > body) {
        throw corrupt("tensor " + name + " data [" + std::to_string(begin) + ", " +
                      std::to_string(end) + ") lies beyond the file's " + std::to_string(body) +
                      " data bytes (truncated?)");
      }
      if (end - begin != numel * dt->bytes) {
        throw corrupt("tensor " + name + " has " + std::to_string(end - begin) +
                      " bytes but its shape needs " + std::to_string(numel * dt->bytes));
      }
      torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(dt->type));
      if (numel) read_at(t.data_ptr(), end - begin, base + begin);
      out.emplace(name, std::move(t));
    } catch (const Json::exception& e) {
      throw corrupt("tensor " + name + " has a malformed header entry: " + e.what());
    }
  }
  return out;
}

void WriteSafetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> cpu;
  cpu.reserve(tensors.size());
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    size_t bytes = static_cast<size_t>(c.numel()) * c.element_size();
    header[name] = {{"dtype", SafetensorsDtypeName(c.scalar_type())},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    cpu.push_back(std::move(c));
  }
  std::string head = header.dump();
  while ((8 + head.size()) % 8) head.push_back(' ');
  std::string out;
  out.reserve(8 + head.size() + offset);
  uint64_t n = head.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += head;
  for (const auto& c : cpu) {
    out.append(static_cast<const char*>(c.data_ptr()),
               static_cast<size_t>(c.numel()) * c.element_size());
  }
  WriteFileAtomic(path, out);
}

}  // namespace burst
