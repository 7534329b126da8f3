#include "core/fs.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/status.h"

namespace burst {
namespace {

TEST(Fs, Sha256KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Fs, AtomicWriteReplacesWholeFileAndHashesMatch) {
  fs::path dir = MakeTempDir("burst-fs-");
  fs::path f = dir / "a.txt";
  WriteFileAtomic(f, "first");
  WriteFileAtomic(f, "second version");
  EXPECT_EQ(ReadFile(f), "second version");
  EXPECT_EQ(Sha256File(f), Sha256Hex("second version"));
  // No temp files are left beside it.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1);
  fs::remove_all(dir);
}

TEST(Fs, MissingFileIsNotFoundNamingThePath) {
  try {
    ReadFile("/nonexistent/burst/file.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/burst/file.json"), std::string::npos);
  }
}

unsigned Mode(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

TEST(Fs, AFullDiskIsResourceExhaustedNamingThePath) {
  Status full = IoStatus(ENOSPC, "cannot write", "/data/x.tmp", Code::kInternal);
  EXPECT_EQ(full.code(), Code::kResourceExhausted);
  EXPECT_EQ(full.message(), "disk full: cannot write /data/x.tmp: " + std::string(std::strerror(ENOSPC)));
  EXPECT_EQ(full.param(), "/data/x.tmp");
  EXPECT_EQ(IoStatus(EDQUOT, "cannot write", "/q", Code::kInternal).code(), Code::kResourceExhausted);
  EXPECT_EQ(IoStatus(EIO, "cannot write", "/d", Code::kInternal).code(), Code::kInternal);

  // WriteFileAtomic on a real full disk (a 16 KiB tmpfs; needs the right to mount).
  fs::path dir = MakeTempDir("burst-fs-");
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=16k") != 0) {
    fs::remove_all(dir);
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  Status s = Try([&] { WriteFileAtomic(dir / "big", std::string(64 << 10, 'x')); });
  EXPECT_EQ(s.code(), Code::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("disk full: cannot write " + (dir / "big").string()), std::string::npos)
      << s.message();
  EXPECT_TRUE(fs::is_empty(dir)) << "the temp file is removed, its space freed";
  ::umount(dir.c_str());
  fs::remove_all(dir);
}

TEST(Fs, CreateDirectoriesUsesItsModeAndRestrictModeOnlyTakesAway) {
  const mode_t old = ::umask(022);
  fs::path dir = MakeTempDir("burst-fs-");
  CreateDirectories(dir / "a" / "b", 0700);
  EXPECT_EQ(Mode(dir / "a"), 0700u);
  EXPECT_EQ(Mode(dir / "a" / "b"), 0700u);
  CreateDirectories(dir / "a" / "b", 0700);  // existing: fine
  WriteFileAtomic(dir / "f", "x");
  fs::permissions(dir / "f", fs::perms(0644));
  testing::internal::CaptureStderr();
  EXPECT_TRUE(RestrictMode(dir / "f", 0600));
  EXPECT_FALSE(RestrictMode(dir / "f", 0600)) << "tight already";
  fs::permissions(dir / "f", fs::perms(0400));
  EXPECT_FALSE(RestrictMode(dir / "f", 0600)) << "never adds a bit";
  EXPECT_EQ(Mode(dir / "f"), 0400u);
  EXPECT_FALSE(RestrictMode(dir / "missing", 0600));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find((dir / "f").string() + " had mode 0644, open beyond its owner; restricted to 0600"),
            std::string::npos)
      << err;
  ::umask(old);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace burst
