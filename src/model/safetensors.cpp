#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"
#include "model/safetensors_header.h"

namespace burst {
namespace {

// The torch type of each dtype name safetensors_header.cpp accepts.
constexpr std::pair<const char*, torch::ScalarType> kDtypes[] = {
    {"F32", torch::kFloat32}, {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16}, {"F64", torch::kFloat64},
    {"I64", torch::kInt64},   {"I32", torch::kInt32},   {"I16", torch::kInt16},     {"I8", torch::kInt8},
    {"U8", torch::kUInt8},    {"BOOL", torch::kBool},
};

torch::ScalarType TorchDtype(const std::string& name) {
  for (const auto& [n, type] : kDtypes)
    if (name == n) return type;
  throw Error(Code::kInternal, "safetensors dtype " + name + " has no torch type");
}

}  // namespace

std::string SafetensorsDtypeName(torch::ScalarType dtype) {
  for (const auto& [name, type] : kDtypes)
    if (type == dtype) return name;
  throw Error(Code::kInvalidArgument,
              std::string("dtype not storable in safetensors: ") + c10::toString(dtype));
}

TensorMap ReadSafetensors(const std::filesystem::path& path, std::map<std::string, std::string>* metadata) {
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
  if (::fstat(fd, &st) != 0) throw Error(Code::kDataLoss, "cannot stat " + file, file);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  auto read_at = [&](void* dst, size_t len, uint64_t off) {
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::pread(fd, static_cast<char*>(dst) + done, len - done, static_cast<off_t>(off + done));
      if (n <= 0) {
        throw Error(Code::kDataLoss,
                    file + ": not a valid safetensors file: short read at byte " + std::to_string(off + done),
                    file);
      }
      done += static_cast<size_t>(n);
    }
  };
  std::string prefix(8, '\0');
  if (file_size >= 8) read_at(prefix.data(), 8, 0);
  const uint64_t header_len = SafetensorsHeaderLength(prefix, file_size, file);
  std::string header_text(header_len, '\0');
  read_at(header_text.data(), header_len, 8);
  SafetensorsHeader header = ParseSafetensorsHeader(header_text, file_size, file);
  if (metadata)
    for (auto& [key, value] : header.metadata) (*metadata)[key] = std::move(value);
  TensorMap out;
  for (const SafetensorsEntry& e : header.tensors) {
    torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(TorchDtype(e.dtype)));
    if (e.numel) read_at(t.data_ptr(), e.end - e.begin, header.data_start + e.begin);
    out.emplace(e.name, std::move(t));
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
    out.append(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.element_size());
  }
  WriteFileAtomic(path, out);
}

}  // namespace burst
