// Tests of the safetensors reader/writer (safetensors.h): round trips of every
// dtype the engine stores, header layout, and corrupt / truncated / missing
// files reported as burst::Error naming the file and the tensor.
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/fs.h"
#include "core/json.h"
#include "model/test_util.h"

namespace burst {
namespace {

using test_util::ExpectBurstError;
using test_util::TempDir;

uint64_t HeaderLength(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  return n;
}

void WriteRaw(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string LittleEndian64(uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return s;
}

NamedTensors SampleTensors() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  NamedTensors t;
  t.emplace_back("f32", torch::randn({3, 5}, gen));
  t.emplace_back("bf16", torch::randn({4, 3}, gen).to(torch::kBFloat16));
  t.emplace_back("f16", torch::randn({2, 2, 3}, gen).to(torch::kFloat16));
  t.emplace_back("i64", torch::tensor({int64_t{-3}, int64_t{0}, int64_t{1} << 40, int64_t{7}}));
  t.emplace_back("scalar", torch::tensor(2.5f).reshape({}));
  t.emplace_back("empty", torch::zeros({0, 4}));
  // Non-contiguous input: written as its logical (contiguous) values.
  t.emplace_back("transposed", torch::arange(12, torch::kFloat32).view({3, 4}).t());
  // The last tensor in data order; the truncation test cuts into it.
  t.emplace_back("model.layers.1.mlp.down_proj.weight", torch::randn({6, 7}, gen));
  return t;
}

TEST(Safetensors, RoundTripDtypesAndMetadata) {
  TempDir dir;
  const auto path = dir / "t.safetensors";
  NamedTensors tensors = SampleTensors();
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "hello \"world\""}};
  WriteSafetensors(path, tensors, meta);

  std::map<std::string, std::string> got_meta;
  TensorMap got = ReadSafetensors(path, &got_meta);
  EXPECT_EQ(got_meta, meta);
  ASSERT_EQ(got.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(got.count(name));
    const torch::Tensor& g = got.at(name);
    EXPECT_EQ(g.scalar_type(), t.scalar_type());
    EXPECT_EQ(g.sizes().vec(), t.sizes().vec());
    EXPECT_TRUE(g.is_contiguous());
    EXPECT_TRUE(torch::equal(g, t.contiguous()));
  }
  // Without a metadata pointer the reader still works.
  EXPECT_EQ(ReadSafetensors(path).size(), tensors.size());
}

TEST(Safetensors, NoMetadataWritesNone) {
  TempDir dir;
  const auto path = dir / "t.safetensors";
  WriteSafetensors(path, {{"x", torch::ones({2})}});
  std::map<std::string, std::string> meta = {{"stale", "value"}};
  TensorMap got = ReadSafetensors(path, &meta);
  EXPECT_EQ(meta.size(), 1u);  // untouched: the file has no __metadata__
  std::string bytes = ReadFile(path);
  Json header = Json::parse(bytes.substr(8, HeaderLength(bytes)));
  EXPECT_FALSE(header.contains("__metadata__"));
}

TEST(Safetensors, HeaderIsAlignedAndDescribesData) {
  TempDir dir;
  NamedTensors tensors = SampleTensors();
  // Try names of several lengths so the unpadded header length varies.
  for (int extra = 0; extra < 8; ++extra) {
    SCOPED_TRACE(extra);
    const auto path = dir / ("t" + std::to_string(extra) + ".safetensors");
    NamedTensors ts = tensors;
    ts.emplace_back(std::string(static_cast<size_t>(extra + 1), 'n'), torch::ones({1}));
    WriteSafetensors(path, ts, {{"k", std::string(static_cast<size_t>(extra), 'v')}});
    std::string bytes = ReadFile(path);
    ASSERT_GE(bytes.size(), 8u);
    uint64_t n = HeaderLength(bytes);
    EXPECT_EQ((8 + n) % 8, 0u) << "data block must start 8-byte aligned";
    ASSERT_LE(8 + n, bytes.size());
    Json header = Json::parse(bytes.substr(8, n));
    ASSERT_TRUE(header.is_object());
    // Offsets tile the data block exactly; dtype names are safetensors'.
    size_t total = 0;
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      auto off = (*it)["data_offsets"];
      total += off[1].get<size_t>() - off[0].get<size_t>();
    }
    EXPECT_EQ(8 + n + total, bytes.size());
    EXPECT_EQ(header["f32"]["dtype"], "F32");
    EXPECT_EQ(header["bf16"]["dtype"], "BF16");
    EXPECT_EQ(header["f16"]["dtype"], "F16");
    EXPECT_EQ(header["i64"]["dtype"], "I64");
    EXPECT_EQ(header["f16"]["shape"], Json::array({2, 2, 3}));
    EXPECT_EQ(header["transposed"]["shape"], Json::array({4, 3}));
  }
}

TEST(Safetensors, DtypeNames) {
  EXPECT_EQ(SafetensorsDtypeName(torch::kFloat32), "F32");
  EXPECT_EQ(SafetensorsDtypeName(torch::kBFloat16), "BF16");
  EXPECT_EQ(SafetensorsDtypeName(torch::kFloat16), "F16");
  EXPECT_EQ(SafetensorsDtypeName(torch::kInt64), "I64");
  EXPECT_EQ(SafetensorsDtypeName(torch::kBool), "BOOL");
  ExpectBurstError([] { SafetensorsDtypeName(torch::kComplexFloat); }, Code::kInvalidArgument);
}

TEST(Safetensors, TruncatedFileIsDataLossNamingFileAndTensor) {
  TempDir dir;
  const auto path = dir / "cut.safetensors";
  NamedTensors tensors = SampleTensors();
  WriteSafetensors(path, tensors);
  std::string bytes = ReadFile(path);
  for (size_t cut : {size_t{1}, size_t{3}, size_t{20}}) {
    SCOPED_TRACE(cut);
    WriteRaw(path, bytes.substr(0, bytes.size() - cut));
    Status s = ExpectBurstError([&] { ReadSafetensors(path); }, Code::kDataLoss,
                                {path.string(), "model.layers.1.mlp.down_proj.weight"});
    EXPECT_EQ(s.param(), path.string());
  }
}

TEST(Safetensors, HeaderLengthBeyondFileIsDataLoss) {
  TempDir dir;
  const auto path = dir / "bad.safetensors";
  WriteSafetensors(path, {{"x", torch::ones({4})}});
  std::string bytes = ReadFile(path);
  // Claim a header longer than the whole file.
  WriteRaw(path, LittleEndian64(bytes.size() + 100) + bytes.substr(8));
  ExpectBurstError([&] { ReadSafetensors(path); }, Code::kDataLoss, {path.string()});
  // An absurd length (beyond any sane header) too.
  WriteRaw(path, LittleEndian64(~uint64_t{0}) + bytes.substr(8));
  ExpectBurstError([&] { ReadSafetensors(path); }, Code::kDataLoss, {path.string()});
  // Shorter than the 8-byte length prefix.
  WriteRaw(path, std::string("\x01\x02\x03", 3));
  ExpectBurstError([&] { ReadSafetensors(path); }, Code::kDataLoss, {path.string()});
}

TEST(Safetensors, GarbageHeaderIsDataLoss) {
  TempDir dir;
  const auto path = dir / "garbage.safetensors";
  const std::string junk = "{this is not json!!";
  WriteRaw(path, LittleEndian64(junk.size()) + junk + std::string(16, '\0'));
  ExpectBurstError([&] { ReadSafetensors(path); }, Code::kDataLoss, {path.string()});

  // Valid JSON that is not an object.
  const std::string arr = "[1, 2, 3]";
  WriteRaw(path, LittleEndian64(arr.size()) + arr);
  ExpectBurstError([&] { ReadSafetensors(path); }, Code::kDataLoss, {path.string()});

  // An entry with an unknown dtype names the tensor.
  const std::string bad_dtype = R"({"w": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}})";
  WriteRaw(path, LittleEndian64(bad_dtype.size()) + bad_dtype + std::string(16, '\0'));
  ExpectBurstError([&] { ReadSafetensors(path); }, Code::kDataLoss, {path.string(), "w"});

  // Offsets that disagree with the shape name the tensor.
  const std::string bad_len =
      R"({"weird_tensor": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})";
  WriteRaw(path, LittleEndian64(bad_len.size()) + bad_len + std::string(16, '\0'));
  ExpectBurstError([&] { ReadSafetensors(path); }, Code::kDataLoss, {path.string(), "weird_tensor"});

  // An entry without data_offsets names the tensor.
  const std::string no_off = R"({"lonely": {"dtype": "F32", "shape": [1]}})";
  WriteRaw(path, LittleEndian64(no_off.size()) + no_off + std::string(4, '\0'));
  ExpectBurstError([&] { ReadSafetensors(path); }, Code::kDataLoss, {path.string(), "lonely"});
}

// Header fields of the wrong JSON type are corrupt files too (kDataLoss
// naming the file), not JSON library exceptions.
TEST(Safetensors, WrongTypesInHeaderAreDataLoss) {
  TempDir dir;
  const auto path = dir / "types.safetensors";
  const std::vector<std::string> headers = {
      R"({"t": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}})",
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}})",
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 4]}})",
  };
  for (const auto& h : headers) {
    SCOPED_TRACE(h);
    WriteRaw(path, LittleEndian64(h.size()) + h + std::string(4, '\0'));
    ExpectBurstError([&] { ReadSafetensors(path); }, Code::kDataLoss, {path.string()});
  }
}

TEST(Safetensors, MissingFileIsNotFound) {
  TempDir dir;
  const auto path = dir / "nope.safetensors";
  ExpectBurstError([&] { ReadSafetensors(path); }, Code::kNotFound, {path.string()});
}

TEST(Safetensors, OverwriteReplacesFileAtomically) {
  TempDir dir;
  const auto path = dir / "t.safetensors";
  WriteSafetensors(path, {{"a", torch::ones({3})}});
  WriteSafetensors(path, {{"b", torch::full({2}, 4.0f)}});
  TensorMap got = ReadSafetensors(path);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(torch::equal(got.at("b"), torch::full({2}, 4.0f)));
  // No temp file left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace burst
