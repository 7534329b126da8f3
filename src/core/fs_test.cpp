#include "core/fs.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace burst
