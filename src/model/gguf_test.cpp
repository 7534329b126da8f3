// The GGUF writer byte for byte: half conversion against known encodings,
// q8_0 blocks as ggml's reference makes them, and a written file read back
// by a reader of the format written here from its specification. (The
// whole export is read back by @huggingface/gguf in tests/e2e/cli_test.cpp.)
#include "model/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <map>

#include "core/fs.h"

namespace burst::gguf {
namespace {

TEST(Gguf, HalvesAreRoundedToNearestEven) {
  EXPECT_EQ(F32ToF16(0.0f), 0x0000);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(-2.0f), 0xc000);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00) << "rounds up past the largest half: inf";
  EXPECT_EQ(F32ToF16(1e6f), 0x7c00);
  EXPECT_EQ(F32ToF16(INFINITY), 0x7c00);
  EXPECT_EQ(F32ToF16(-INFINITY), 0xfc00);
  EXPECT_EQ(F32ToF16(NAN) & 0x7c00, 0x7c00);
  EXPECT_NE(F32ToF16(NAN) & 0x03ff, 0);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -24)), 0x0001) << "the smallest subnormal";
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000) << "half of it is a tie, to even: zero";
  EXPECT_EQ(F32ToF16(std::ldexp(3.0f, -25)), 0x0002) << "1.5 of it is a tie, to even: 2";
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -14)), 0x0400) << "the smallest normal";
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to even (1); 1 + 3*2^-11 to 1 + 2^-9.
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01) << "above the tie: up";
  // Every half survives the trip back and forth.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(F32ToF16(f), h) << std::hex << h;
  }
}

TEST(Gguf, Q8BlocksAreScaleAndRoundedQuotients) {
  std::vector<float> x(64);
  for (int i = 0; i < 32; ++i) x[i] = (i - 16) * 0.25f;  // amax 4 (at i = 0)
  // The second block is zero: scale 0, quotients 0.
  std::vector<uint8_t> out(2 * kQ8Bytes, 0xff);
  QuantizeQ8_0(x.data(), 64, out.data());
  uint16_t d;
  std::memcpy(&d, out.data(), 2);
  EXPECT_EQ(d, F32ToF16(4.0f / 127.0f));
  for (int i = 0; i < 32; ++i) {
    const auto q = static_cast<int8_t>(out[2 + i]);
    EXPECT_EQ(q, static_cast<int8_t>(std::roundf(x[i] * (127.0f / 4.0f)))) << i;
    EXPECT_LE(std::fabs(q * F16ToF32(d) - x[i]), 4.0f / 127.0f) << i;
  }
  EXPECT_EQ(static_cast<int8_t>(out[2]), -127);
  std::memcpy(&d, out.data() + kQ8Bytes, 2);
  EXPECT_EQ(d, 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[kQ8Bytes + 2 + i], 0);
  EXPECT_EQ(TensorBytes(TensorType::kQ8_0, 64), 68);
  EXPECT_EQ(TensorBytes(TensorType::kF16, 64), 128);
}

// A reader of what Write writes, from the format's description.
struct Reader {
  std::string b;
  size_t at = 0;
  template <typename T>
  T Get() {
    T v;
    EXPECT_LE(at + sizeof(T), b.size());
    std::memcpy(&v, b.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string Str() {
    const auto n = Get<uint64_t>();
    std::string s = b.substr(at, n);
    at += n;
    return s;
  }
};

TEST(Gguf, AWrittenFileReadsBack) {
  const fs::path dir = MakeTempDir("burst-gguf-test");
  std::vector<float> w(2 * 3 * 32), norm = {1.5f, -2.0f, 0.25f};
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i)) * 3.0f;
  Writer g;
  g.Set("general.architecture", std::string("llama"));
  g.Set("llama.block_count", uint32_t{4});
  g.Set("llama.rope.freq_base", 10000.0f);
  g.Set("tokenizer.ggml.tokens", std::vector<std::string>{"<s>", "a", "b"});
  g.Set("tokenizer.ggml.scores", std::vector<float>{0.0f, -1.0f, -2.5f});
  g.Set("tokenizer.ggml.token_type", std::vector<int32_t>{3, 1, 1});
  g.Set("tokenizer.ggml.add_bos_token", true);
  g.Set("tokenizer.ggml.bos_token_id", int32_t{0});
  g.Set("llama.block_count", uint32_t{2});  // replaces, keeps its place
  ASSERT_TRUE(g.AddTensor({"norm.weight", {3}, norm.data(), TensorType::kF32}).ok());
  ASSERT_TRUE(g.AddTensor({"w16", {6, 32}, w.data(), TensorType::kF16}).ok());
  ASSERT_TRUE(g.AddTensor({"w8", {2, 3, 32}, w.data(), TensorType::kQ8_0}).ok());
  // What cannot be written is refused, naming the tensor.
  Status odd = g.AddTensor({"odd", {3}, norm.data(), TensorType::kQ8_0});
  EXPECT_EQ(odd.code(), Code::kInvalidArgument);
  EXPECT_NE(odd.message().find("\"odd\""), std::string::npos) << odd.message();
  EXPECT_FALSE(g.AddTensor({"w16", {3}, norm.data(), TensorType::kF32}).ok()) << "a repeated name";
  EXPECT_FALSE(g.AddTensor({std::string(64, 'n'), {3}, norm.data(), TensorType::kF32}).ok()) << "a long name";
  EXPECT_FALSE(g.AddTensor({"zero", {0, 3}, norm.data(), TensorType::kF32}).ok());
  EXPECT_EQ(g.tensor_count(), 3u);
  ASSERT_TRUE(g.Write(dir / "m.gguf").ok());
  EXPECT_FALSE(fs::exists(dir / ("m.gguf.tmp." + std::to_string(::getpid()))));

  Reader r{ReadFile(dir / "m.gguf")};
  EXPECT_EQ(r.b.substr(0, 4), "GGUF");
  r.at = 4;
  EXPECT_EQ(r.Get<uint32_t>(), 3u);
  EXPECT_EQ(r.Get<uint64_t>(), 3u);
  ASSERT_EQ(r.Get<uint64_t>(), 8u);
  std::vector<std::string> keys;
  std::map<std::string, std::string> values;  // each as text; arrays joined with ","
  for (int i = 0; i < 8; ++i) {
    keys.push_back(r.Str());
    auto one = [&](uint32_t type) -> std::string {
      switch (type) {
        case 4:
          return std::to_string(r.Get<uint32_t>());
        case 5:
          return std::to_string(r.Get<int32_t>());
        case 6:
          return std::to_string(r.Get<float>());
        case 7:
          return std::to_string(r.Get<uint8_t>());
        case 8:
          return r.Str();
      }
      ADD_FAILURE() << "type " << type;
      return "";
    };
    const auto type = r.Get<uint32_t>();
    if (type != 9) {
      values[keys.back()] = one(type);
      continue;
    }
    const auto elem = r.Get<uint32_t>();
    const auto n = r.Get<uint64_t>();
    std::string joined;
    for (uint64_t j = 0; j < n; ++j) joined += (j ? "," : "") + one(elem);
    values[keys.back()] = joined;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"general.architecture", "llama.block_count",
                                            "llama.rope.freq_base", "tokenizer.ggml.tokens",
                                            "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                                            "tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id"}))
      << "in the order set; a replaced key keeps its place";
  EXPECT_EQ(values["general.architecture"], "llama");
  EXPECT_EQ(values["llama.block_count"], "2");
  EXPECT_EQ(values["llama.rope.freq_base"], std::to_string(10000.0f));
  EXPECT_EQ(values["tokenizer.ggml.tokens"], "<s>,a,b");
  EXPECT_EQ(values["tokenizer.ggml.scores"],
            std::to_string(0.0f) + "," + std::to_string(-1.0f) + "," + std::to_string(-2.5f));
  EXPECT_EQ(values["tokenizer.ggml.token_type"], "3,1,1");
  EXPECT_EQ(values["tokenizer.ggml.add_bos_token"], "1");
  EXPECT_EQ(values["tokenizer.ggml.bos_token_id"], "0");

  struct Info {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    uint64_t offset;
  };
  std::vector<Info> infos(3);
  for (Info& in : infos) {
    in.name = r.Str();
    const auto dims = r.Get<uint32_t>();
    for (uint32_t d = 0; d < dims; ++d) in.ne.push_back(r.Get<uint64_t>());
    in.type = r.Get<uint32_t>();
    in.offset = r.Get<uint64_t>();
  }
  EXPECT_EQ(infos[0].name, "norm.weight");
  EXPECT_EQ(infos[0].ne, (std::vector<uint64_t>{3}));
  EXPECT_EQ(infos[0].type, 0u);
  EXPECT_EQ(infos[1].ne, (std::vector<uint64_t>{32, 6})) << "innermost first";
  EXPECT_EQ(infos[1].type, 1u);
  EXPECT_EQ(infos[2].ne, (std::vector<uint64_t>{32, 3, 2}));
  EXPECT_EQ(infos[2].type, 8u);
  // Offsets from the data's start, each aligned to 32: 12 bytes of f32 take
  // 32, then 192 halves 384 bytes.
  EXPECT_EQ(infos[0].offset, 0u);
  EXPECT_EQ(infos[1].offset, 32u);
  EXPECT_EQ(infos[2].offset, 32u + 384u);
  const size_t data = (r.at + 31) / 32 * 32;
  for (size_t i = r.at; i < data; ++i) EXPECT_EQ(r.b[i], '\0') << "padding";
  EXPECT_EQ(r.b.size(), data + 416 + 6 * kQ8Bytes + (32 - 6 * kQ8Bytes % 32) % 32);
  float f;
  std::memcpy(&f, r.b.data() + data + 4, 4);
  EXPECT_EQ(f, -2.0f);
  for (size_t i = 0; i < w.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, r.b.data() + data + 32 + 2 * i, 2);
    ASSERT_EQ(h, F32ToF16(w[i])) << i;
  }
  std::vector<uint8_t> q8(6 * kQ8Bytes);
  QuantizeQ8_0(w.data(), static_cast<int64_t>(w.size()), q8.data());
  EXPECT_EQ(std::memcmp(r.b.data() + data + 416, q8.data(), q8.size()), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace burst::gguf
