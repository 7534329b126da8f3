#include "core/fs.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "core/status.h"

namespace burst {

std::string ReadFile(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error(Code::kNotFound, "cannot open " + path.string(), path.string());
  std::string data;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) data.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      ::close(fd);
      throw Error(Code::kDataLoss, "cannot read " + path.string(), path.string());
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
}

void SyncPath(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void WriteFileAtomic(const fs::path& path, std::string_view data) {
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error(IoStatus(errno, "cannot create", tmp, Code::kInternal));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(IoStatus(err, "cannot write", tmp, Code::kInternal));
    }
    off += static_cast<size_t>(n);
  }
  // A full disk may surface only here (delayed allocation, network file
  // systems): a file that did not reach the disk is not committed.
  // (EINVAL: a file system that cannot sync; the write itself went through.)
  const int synced = ::fsync(fd) == 0 || errno == EINVAL ? 0 : errno;
  const int closed = ::close(fd) == 0 ? 0 : errno;
  if (synced != 0 || closed != 0) {
    const int err = synced != 0 ? synced : closed;
    ::unlink(tmp.c_str());
    throw Error(IoStatus(err, "cannot write", tmp, Code::kInternal));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(Code::kInternal, "cannot rename into " + path.string(), path.string());
  }
  SyncPath(path.parent_path().empty() ? fs::path(".") : path.parent_path());
}

namespace {
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

std::string Hex(const unsigned char* digest, unsigned len) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}
}  // namespace

std::string Sha256Hex(std::string_view data) {
  MdCtx ctx(EVP_MD_CTX_new());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx.get(), data.data(), data.size());
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  return Hex(digest, len);
}

std::string Sha256File(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Code::kNotFound, "cannot open " + path.string(), path.string());
  MdCtx ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  return Hex(digest, len);
}

bool IsDiskFull(int err) { return err == ENOSPC || err == EDQUOT; }

Status IoStatus(int err, const std::string& what, const fs::path& path, Code otherwise) {
  const std::string detail = what + " " + path.string() + ": " + std::strerror(err);
  if (IsDiskFull(err)) return Status(Code::kResourceExhausted, "disk full: " + detail, path.string());
  return Status(otherwise, detail, path.string());
}

void CreateDirectories(const fs::path& dir, unsigned mode) {
  fs::path at;
  for (const fs::path& part : dir) {
    at /= part;
    if (::mkdir(at.c_str(), static_cast<mode_t>(mode)) == 0 || errno == EEXIST) continue;
    throw Error(IoStatus(errno, "cannot create", at, Code::kUnavailable));
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(Code::kUnavailable, dir.string() + " is not a folder", dir.string());
}

bool RestrictMode(const fs::path& path, unsigned mode) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  const unsigned have = st.st_mode & 07777;
  const unsigned want = have & mode;
  if (want == have) return false;
  if (::chmod(path.c_str(), static_cast<mode_t>(want)) != 0) {
    throw Error(IoStatus(errno, "cannot restrict the permissions of", path, Code::kUnavailable));
  }
  std::fprintf(stderr, "burst: %s had mode %04o, open beyond its owner; restricted to %04o\n", path.c_str(),
               have, want);
  return true;
}

fs::path MakeTempDir(const std::string& prefix) {
  std::string templ = (fs::temp_directory_path() / (prefix + "XXXXXX")).string();
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw Error(Code::kInternal, "mkdtemp failed: " + templ);
  return fs::path(buf.data());
}

}  // namespace burst
