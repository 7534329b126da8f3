#include "train/loop_pack.h"

#include <gtest/gtest.h>

#include <cmath>

namespace burst {
namespace {

std::vector<int64_t> Range(int64_t from, int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

std::vector<int64_t> Cat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Whether query q of row r may see key k.
bool Sees(const LoopPacking& p, int64_t r, int64_t q, int64_t k) {
  return p.mask[static_cast<size_t>((r * p.width + q) * p.width + k)] == 0.0f;
}

// Every datum token reads back its own id at the position it has in its datum.
void ExpectEachTokenAtItsPlace(const LoopPacking& p, const std::vector<std::vector<int64_t>>& data) {
  size_t at = 0;
  for (const auto& d : data) {
    for (size_t k = 0; k < d.size(); ++k, ++at) {
      ASSERT_LT(at, p.token_rows.size());
      const auto flat = static_cast<size_t>(p.token_rows[at]);
      EXPECT_EQ(p.ids[flat], d[k]);
      EXPECT_EQ(p.positions[flat], static_cast<int64_t>(k));
    }
  }
  EXPECT_EQ(at, p.token_rows.size());
}

TEST(LoopPackTest, DataSharingNothingPacksOneDatumPerRowInDatumOrder) {
  const std::vector<std::vector<int64_t>> data = {Range(50, 5), Range(10, 3), Range(30, 20)};
  LoopPacking p = PackLoopData(data, 4, 512);
  EXPECT_EQ(p.rows, 3);
  EXPECT_EQ(p.width, 20);
  EXPECT_TRUE(p.mask.empty()) << "plain causal rows";
  EXPECT_EQ(p.fed, 28);
  EXPECT_EQ(p.token_rows[0], 0) << "datum 0 in row 0";
  EXPECT_EQ(p.token_rows[5], 20) << "datum 1 in row 1";
  EXPECT_EQ(p.token_rows[8], 40) << "datum 2 in row 2";
  ExpectEachTokenAtItsPlace(p, data);
}

TEST(LoopPackTest, ATailSeesThePrefixAndItselfOnly) {
  const std::vector<int64_t> prompt = Range(100, 6);
  const std::vector<std::vector<int64_t>> data = {Cat(prompt, {7, 8}), Range(1, 4), Cat(prompt, {9}),
                                                  Cat(prompt, {7, 5, 3})};
  LoopPacking p = PackLoopData(data, 4, 512);
  ASSERT_EQ(p.rows, 2);
  EXPECT_EQ(p.fed, 6 + 2 + 1 + 3 + 4);
  ASSERT_EQ(p.width, 12);
  ExpectEachTokenAtItsPlace(p, data);
  // Row 0 holds datums 0, 2 and 3 (the first datum's row comes first): the
  // prefix of 6, then tails [7 8] [9] [7 5 3] at 6, 8 and 9.
  EXPECT_EQ(p.token_rows[0], 0);
  EXPECT_EQ(p.token_rows[6], 6);
  EXPECT_EQ(p.token_rows[18], 8) << "datum 2's tail";
  EXPECT_EQ(p.token_rows[19], 0) << "datum 3 reads the shared prefix";
  EXPECT_EQ(p.token_rows[25], 9) << "datum 3's tail";
  EXPECT_EQ(p.token_rows[8], p.width) << "datum 1 alone in row 1";
  for (int64_t q = 0; q < 6; ++q) {
    for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(Sees(p, 0, q, k), k <= q) << q << " " << k;
  }
  // Datum 3's last tail token (at 11) sees the prefix and its tail 9..11.
  for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(Sees(p, 0, 11, k), k < 6 || (k >= 9 && k <= 11)) << k;
  // Datum 2's one tail token (at 8) sees the prefix and itself.
  for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(Sees(p, 0, 8, k), k < 6 || k == 8) << k;
  // Row 1 is causal over its datum; its padding too (never a row of -inf).
  for (int64_t q = 0; q < 12; ++q) {
    for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(Sees(p, 1, q, k), k <= q) << q << " " << k;
  }
}

TEST(LoopPackTest, ShortCommonPrefixesAndFullRowsAreNotShared) {
  const std::vector<int64_t> prompt = Range(100, 3);
  LoopPacking short_prefix = PackLoopData({Cat(prompt, {1, 2}), Cat(prompt, {3, 4})}, 4, 512);
  EXPECT_EQ(short_prefix.rows, 2) << "3 shared tokens, 4 needed";
  LoopPacking long_tails =
      PackLoopData({Cat(Range(100, 10), Range(1, 11)), Cat(Range(100, 10), Range(20, 11))}, 4, 512);
  EXPECT_EQ(long_tails.rows, 2) << "10 shared tokens of 21: less than half";
  const std::vector<int64_t> long_prompt = Range(100, 10);
  LoopPacking narrow = PackLoopData(
      {Cat(long_prompt, Range(1, 5)), Cat(long_prompt, Range(20, 5)), Cat(long_prompt, Range(40, 5))}, 4, 20);
  EXPECT_EQ(narrow.rows, 2) << "10 + 5 + 5 fit in 20, a third tail does not";
  EXPECT_EQ(narrow.fed, 20 + 15);
}

// Two prompts that share a system prompt of 20 tokens, each with three
// completions: two rows, each prompt once, not one row sharing only the 20.
TEST(LoopPackTest, GroupsOfOnePromptDoNotMergeOverAShorterCommonPrefix) {
  const std::vector<int64_t> system = Range(100, 20);
  const std::vector<int64_t> a = Cat(system, Range(300, 10)), b = Cat(system, Range(400, 10));
  std::vector<std::vector<int64_t>> data;
  for (int64_t k = 0; k < 3; ++k) {
    data.push_back(Cat(a, {k + 1}));
    data.push_back(Cat(b, {k + 1}));
  }
  LoopPacking p = PackLoopData(data, 4, 512);
  EXPECT_EQ(p.rows, 2);
  EXPECT_EQ(p.fed, 2 * (30 + 3));
  ExpectEachTokenAtItsPlace(p, data);
}

TEST(LoopPackTest, RepeatedDatumsAreFedOnce) {
  const std::vector<std::vector<int64_t>> data = {Range(5, 8), Range(5, 8), Range(5, 8)};
  LoopPacking p = PackLoopData(data, 4, 512);
  EXPECT_EQ(p.rows, 1);
  EXPECT_EQ(p.fed, 8);
  ExpectEachTokenAtItsPlace(p, data);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(p.token_rows[i], p.token_rows[i + 16]);
}

TEST(LoopPackTest, NoDatumsAndEmptyDatumsPackToNothing) {
  LoopPacking none = PackLoopData({}, 4, 512);
  EXPECT_EQ(none.rows, 0);
  EXPECT_TRUE(none.token_rows.empty());
  LoopPacking empty = PackLoopData({{}, Range(1, 3)}, 4, 512);
  EXPECT_EQ(empty.token_rows.size(), 3u);
  ExpectEachTokenAtItsPlace(empty, {{}, Range(1, 3)});
}

}  // namespace
}  // namespace burst
