#include "store/object_store.h"

#include "store/s3_store.h"

namespace burst {
namespace {

bool SegmentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-' || c == '=';
}

}  // namespace

Status ValidateKey(std::string_view key, const std::string& param) {
  if (key.empty() || key.size() > 1024) {
    return Status(Code::kInvalidArgument, "object key must be 1-1024 bytes long", param);
  }
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('/', start);
    if (end == std::string_view::npos) end = key.size();
    std::string_view seg = key.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") {
      return Status(Code::kInvalidArgument,
                    "object key \"" + std::string(key) + "\" has an empty, \".\" or \"..\" segment", param);
    }
    for (char c : seg) {
      if (!SegmentChar(c)) {
        return Status(Code::kInvalidArgument,
                      "object key \"" + std::string(key) +
                          "\" may only contain letters, digits, '.', '_', '-', '=' and '/'",
                      param);
      }
    }
    start = end + 1;
  }
  return Status();
}

Result<std::unique_ptr<ObjectStore>> OpenObjectStore(const std::string& url) {
  if (url == "mem://") return NewMemStore();
  const std::string file = "file://";
  if (url.rfind(file, 0) == 0) {
    std::filesystem::path root = url.substr(file.size());
    if (!root.is_absolute()) {
      return Status(Code::kInvalidArgument,
                    "object store URL \"" + url + "\" needs an absolute path (file:///dir)", "store");
    }
    return NewFileStore(root);
  }
  if (url.rfind("s3://", 0) == 0) {
    auto config = ParseS3Url(url);
    if (!config.ok()) return config.status();
    return NewS3Store(std::move(config).value());
  }
  return Status(
      Code::kInvalidArgument,
      "unknown object store URL \"" + url + "\" (expected mem://, file:///dir or s3://bucket/prefix)",
      "store");
}

}  // namespace burst
