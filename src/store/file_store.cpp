// The file:// ObjectStore: objects are files under ROOT/objects/<key>.
//
// A write goes to a uniquely named temp file under ROOT/tmp/ (same file
// system), is fsynced, renamed onto its key, and the key's folder is fsynced:
// readers and crashes see the old object or the whole new one. Temp files
// left by a writer that died are ignored by readers and swept by the next
// NewFileStore on the same root once they are an hour old.
//
// Objects are the organisations' data: every file is written 0600 and every
// folder made 0700, and a root left looser by an earlier version is
// tightened at open (a 0700 root alone keeps everyone else out of all of it).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>

#include "core/fs.h"
#include "store/object_store.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

constexpr unsigned kFileMode = 0600, kDirMode = 0700;

// I/O failures are worth a retry (kUnavailable), except a full disk
// (kResourceExhausted, "disk full: ..."), which needs someone to free space.
Status IoError(const std::string& what, const fs::path& path, const std::error_code& ec) {
  return IoStatus(ec.value(), what, path, Code::kUnavailable);
}
Status IoErrno(const std::string& what, const fs::path& path) {
  return IoStatus(errno, what, path, Code::kUnavailable);
}

// Creates the missing folders of `dir` with kDirMode.
Status MakeDirs(const fs::path& dir) {
  return Try([&] { CreateDirectories(dir, kDirMode); });
}

class FileStore : public ObjectStore {
 public:
  explicit FileStore(fs::path root) : root_(std::move(root)) {}

  Status Init() {
    for (const fs::path& dir : {objects(), tmp()}) {
      if (Status s = MakeDirs(dir); !s.ok()) return s;
    }
    for (const fs::path& dir : {root_, objects(), tmp()}) {
      if (Status s = Try([&] { RestrictMode(dir, kDirMode); }); !s.ok()) return s;
    }
    SweepStaleTemps();
    return Status();
  }

  Status Put(const std::string& key, std::string_view data) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    return WriteVia(key, [&](int fd, const fs::path& tmp) -> Status {
      size_t off = 0;
      while (off < data.size()) {
        ssize_t n = ::write(fd, data.data() + off, data.size() - off);
        if (n < 0) return IoErrno("cannot write", tmp);
        off += static_cast<size_t>(n);
      }
      return Status();
    });
  }

  Status PutFile(const std::string& key, const fs::path& src) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) {
      return Status(errno == ENOENT ? Code::kNotFound : Code::kUnavailable, "cannot open " + src.string(),
                    src.string());
    }
    Status s = WriteVia(key, [&](int fd, const fs::path& tmp) { return Copy(in, src, fd, tmp); });
    ::close(in);
    return s;
  }

  Result<std::string> Get(const std::string& key) const override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    fs::path p = Path(key);
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) return NotFound(key);
    std::string data;
    if (Status s = Try([&] { data = ReadFile(p); }); !s.ok()) return s;
    return data;
  }

  Status GetToFile(const std::string& key, const fs::path& dst) const override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    int in = ::open(Path(key).c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return NotFound(key);
    fs::path tmp = dst;
    tmp += ".part" + UniqueSuffix();
    int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kFileMode);
    if (out < 0) {
      Status s = IoErrno("cannot create", tmp);
      ::close(in);
      return s;
    }
    Status s = Copy(in, Path(key), out, tmp);
    if (s.ok() && ::fsync(out) != 0) s = IoErrno("cannot sync", tmp);
    ::close(out);
    ::close(in);
    std::error_code ec;
    if (s.ok()) {
      fs::rename(tmp, dst, ec);
      if (ec) s = IoError("cannot rename onto", dst, ec);
    }
    if (!s.ok()) fs::remove(tmp, ec);
    return s;
  }

  Result<ObjectInfo> Stat(const std::string& key) const override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    std::error_code ec;
    fs::path p = Path(key);
    if (!fs::is_regular_file(p, ec)) return NotFound(key);
    auto size = fs::file_size(p, ec);
    if (ec) return NotFound(key);
    return ObjectInfo{key, static_cast<int64_t>(size)};
  }

  Result<std::vector<ObjectInfo>> List(const std::string& prefix) const override {
    // Walk the deepest folder the prefix names for sure, then filter.
    std::string dir_part = prefix.substr(0, prefix.rfind('/') == std::string::npos ? 0 : prefix.rfind('/'));
    if (!dir_part.empty()) {
      if (Status s = ValidateKey(dir_part, "prefix"); !s.ok()) return s;
    }
    fs::path start = dir_part.empty() ? objects() : objects() / dir_part;
    std::vector<ObjectInfo> out;
    std::error_code ec;
    if (!fs::is_directory(start, ec)) return out;
    for (fs::recursive_directory_iterator it(start, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      std::string key = fs::relative(it->path(), objects(), ec).generic_string();
      if (ec || key.compare(0, prefix.size(), prefix) != 0) continue;
      out.push_back({key, static_cast<int64_t>(it->file_size(ec))});
    }
    if (ec) return IoError("cannot list", start, ec);
    std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return out;
  }

  Status Delete(const std::string& key) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    std::error_code ec;
    fs::remove(Path(key), ec);
    if (ec && ec != std::errc::no_such_file_or_directory) return IoError("cannot delete", Path(key), ec);
    return Status();
  }

  Status DeletePrefix(const std::string& prefix) override {
    if (prefix.empty() || prefix.back() != '/') {
      return Status(Code::kInvalidArgument, "DeletePrefix needs a prefix ending in '/'", "prefix");
    }
    std::string dir = prefix.substr(0, prefix.size() - 1);
    if (Status s = ValidateKey(dir, "prefix"); !s.ok()) return s;
    std::error_code ec;
    fs::remove_all(objects() / dir, ec);
    if (ec) return IoError("cannot delete", objects() / dir, ec);
    return Status();
  }

  std::string Url() const override { return "file://" + root_.string(); }

 private:
  fs::path objects() const { return root_ / "objects"; }
  fs::path tmp() const { return root_ / "tmp"; }
  fs::path Path(const std::string& key) const { return objects() / key; }

  static Status NotFound(const std::string& key) {
    return Status(Code::kNotFound, "no object \"" + key + "\"", "key");
  }

  static std::string UniqueSuffix() {
    static std::atomic<uint64_t> counter{0};
    static const uint64_t salt = std::random_device{}();
    return "." + std::to_string(::getpid()) + "." + std::to_string(salt % 100000) + "." +
           std::to_string(counter.fetch_add(1));
  }

  static Status Copy(int in, const fs::path& src, int out, const fs::path& dst) {
    char buf[1 << 16];
    for (;;) {
      ssize_t n = ::read(in, buf, sizeof buf);
      if (n < 0) return IoErrno("cannot read", src);
      if (n == 0) return Status();
      for (ssize_t off = 0; off < n;) {
        ssize_t w = ::write(out, buf + off, static_cast<size_t>(n - off));
        if (w < 0) return IoErrno("cannot write", dst);
        off += w;
      }
    }
  }

  // Writes through `fill(fd, tmp_path)` into a temp file, then commits it onto key.
  template <typename Fill>
  Status WriteVia(const std::string& key, Fill&& fill) {
    fs::path tmp_path = tmp() / ("put" + UniqueSuffix());
    int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kFileMode);
    if (fd < 0) return IoErrno("cannot create", tmp_path);
    Status s = fill(fd, tmp_path);
    if (s.ok() && ::fsync(fd) != 0) s = IoErrno("cannot sync", tmp_path);
    if (::close(fd) != 0 && s.ok()) s = IoErrno("cannot write", tmp_path);
    std::error_code ec;
    fs::path dst = Path(key);
    if (s.ok()) s = MakeDirs(dst.parent_path());
    if (s.ok()) {
      fs::rename(tmp_path, dst, ec);
      if (ec) s = IoError("cannot commit", dst, ec);
    }
    if (!s.ok()) {
      fs::remove(tmp_path, ec);
      return s;
    }
    SyncPath(dst.parent_path());
    return Status();
  }

  void SweepStaleTemps() {
    std::error_code ec;
    auto cutoff = fs::file_time_type::clock::now() - std::chrono::hours(1);
    for (fs::directory_iterator it(tmp(), ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code e2;
      if (it->last_write_time(e2) < cutoff && !e2) fs::remove(it->path(), e2);
    }
  }

  fs::path root_;
};

}  // namespace

Result<std::unique_ptr<ObjectStore>> NewFileStore(const fs::path& root) {
  auto store = std::make_unique<FileStore>(root);
  if (Status s = store->Init(); !s.ok()) return s;
  return std::unique_ptr<ObjectStore>(std::move(store));
}

}  // namespace burst
