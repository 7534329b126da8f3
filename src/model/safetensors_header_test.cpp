// The torch-free safetensors header parser: what it accepts, and that every
// corrupt header is kDataLoss naming the file (and the tensor), never a
// crash, a JSON library exception or an enormous allocation.
#include "model/safetensors_header.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace burst {
namespace {

std::string LittleEndian64(uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out;
}

// A file: length prefix, header, `data_bytes` zero bytes of data.
std::string File(const std::string& header, size_t data_bytes) {
  return LittleEndian64(header.size()) + header + std::string(data_bytes, '\0');
}

// Expects kDataLoss with the file as param and every needle in the message.
void ExpectCorrupt(const std::string& bytes, const std::vector<std::string>& needles = {}) {
  try {
    ParseSafetensorsBytes(bytes, "m.safetensors");
    ADD_FAILURE() << "expected kDataLoss";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::kDataLoss) << e.what();
    EXPECT_EQ(e.status().param(), "m.safetensors");
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "no \"" << n << "\" in " << e.what();
  }
}

TEST(SafetensorsHeader, ParsesEntriesAndMetadata) {
  const std::string header = R"({"__metadata__": {"format": "pt", "n": 3},)"
                             R"( "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},)"
                             R"( "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},)"
                             R"( "empty": {"dtype": "I64", "shape": [0, 5], "data_offsets": [22, 22]}})";
  SafetensorsHeader h = ParseSafetensorsBytes(File(header, 22), "m.safetensors");
  EXPECT_EQ(h.data_start, 8 + header.size());
  EXPECT_EQ(h.data_size, 22u);
  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[0].dtype, "F32");
  EXPECT_EQ(h.tensors[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(h.tensors[0].numel, 4u);
  EXPECT_EQ(h.tensors[1].name, "b");
  EXPECT_EQ(h.tensors[1].element_bytes, 2u);
  EXPECT_EQ(h.tensors[1].begin, 16u);
  EXPECT_EQ(h.tensors[1].end, 22u);
  EXPECT_EQ(h.tensors[2].numel, 0u);
  // Non-string metadata values are skipped, not refused.
  EXPECT_EQ(h.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
}

TEST(SafetensorsHeader, LengthPrefixIsChecked) {
  ExpectCorrupt("", {"8-byte header length"});
  ExpectCorrupt(std::string("\x02\x00\x00", 3), {"8-byte header length"});
  ExpectCorrupt(LittleEndian64(100) + "{}", {"exceeds the file size"});
  ExpectCorrupt(LittleEndian64(~uint64_t{0}) + "{}", {"exceeds the file size"});
  // Just within the file: 8 + N == size is a file with no data.
  EXPECT_TRUE(ParseSafetensorsBytes(File("{}", 0), "m.safetensors").tensors.empty());
}

TEST(SafetensorsHeader, HeaderMustBeAJsonObject) {
  ExpectCorrupt(File("{not json", 0), {"not JSON"});
  ExpectCorrupt(File("[1, 2]", 0), {"not a JSON object"});
  // Nesting beyond Burst's JSON limit is refused before it is built.
  ExpectCorrupt(File(std::string(10000, '[') + std::string(10000, ']'), 0), {"not JSON", "nested"});
}

TEST(SafetensorsHeader, EntriesOfTheWrongShapeNameTheTensor) {
  const std::vector<std::string> headers = {
      R"({"t": 5})",
      R"({"t": {"dtype": "F32", "shape": [1]}})",
      R"({"t": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}})",
      R"({"t": {"dtype": "F128", "shape": [1], "data_offsets": [0, 4]}})",
      R"({"t": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})",
      R"({"t": {"dtype": "F32", "shape": {"a": 1}, "data_offsets": [0, 4]}})",
      R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
      R"({"t": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})",
      R"({"t": {"dtype": "F32", "shape": [9223372036854775808], "data_offsets": [0, 4]}})",
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}})",
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 4]}})",
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})",
      // A float far beyond any integer: converting it would be undefined.
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 1e300]}})",
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})",
      R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})",
  };
  for (const auto& h : headers) {
    SCOPED_TRACE(h);
    ExpectCorrupt(File(h, 8), {"m.safetensors", "tensor t"});
  }
}

TEST(SafetensorsHeader, DataBeyondTheFileIsTruncation) {
  ExpectCorrupt(File(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 12),
                {"tensor w", "beyond the file's 12 data bytes", "truncated"});
}

// A shape whose element count wraps around 2^64 could otherwise match a
// small byte range (here 0 bytes) and have the reader allocate the real,
// impossible, shape.
TEST(SafetensorsHeader, ShapeWhoseSizeOverflowsIsCorrupt) {
  ExpectCorrupt(
      File(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 0),
      {"tensor w", "overflows"});
  // numel fits but numel x element size wraps to 0.
  ExpectCorrupt(File(R"({"w": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 0]}})", 0),
                {"tensor w"});
}

}  // namespace
}  // namespace burst
