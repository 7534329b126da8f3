#include "train/loop_pack.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace burst {
namespace {

struct Group {
  int64_t prefix = 0;           // tokens every member shares (a lone datum: all of its)
  int64_t length = 0;           // the packed row: prefix + each member's tail
  std::vector<size_t> members;  // datum indices
};

int64_t CommonPrefix(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int64_t>(i);
}

int64_t Size(const std::vector<int64_t>& v) { return static_cast<int64_t>(v.size()); }

// Datums in one row at most (repeated datums add no tokens to a row).
constexpr size_t kMaxRowMembers = 64;

}  // namespace

LoopPacking PackLoopData(const std::vector<std::vector<int64_t>>& tokens, int64_t min_shared,
                         int64_t max_width) {
  std::vector<size_t> order(tokens.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tokens[a] < tokens[b]; });

  // Neighbours in sorted order share the longest prefixes, and a run's
  // common prefix is the least of its neighbours'. Rows are runs of sorted
  // datums, chosen to save the most tokens in all ((members - 1) x common
  // prefix each), so that the completions of one prompt share their row
  // rather than join the next prompt's over a shorter system prompt.
  const size_t n = order.size();
  std::vector<int64_t> next_common(n, 0);  // sorted i with sorted i + 1
  for (size_t i = 0; i + 1 < n; ++i) next_common[i] = CommonPrefix(tokens[order[i]], tokens[order[i + 1]]);
  std::vector<int64_t> best(n + 1, 0);  // the most saved by rows over the first i sorted datums
  std::vector<size_t> cut(n + 1, 0);    // where the last of those rows starts
  for (size_t i = 1; i <= n; ++i) {
    best[i] = best[i - 1];  // sorted i - 1 alone
    cut[i] = i - 1;
    int64_t p = Size(tokens[order[i - 1]]), longest = p, sum = p;
    for (size_t j = i - 1; j > 0 && i - j < kMaxRowMembers;) {
      --j;  // a row of sorted j..i-1
      const int64_t len = Size(tokens[order[j]]);
      p = std::min({p, next_common[j], len});
      longest = std::max(longest, len);
      sum += len;
      const auto k = static_cast<int64_t>(i - j);
      if (p < min_shared || 2 * p < longest) break;  // no longer run qualifies either
      if (sum - (k - 1) * p > max_width) break;
      if (best[j] + (k - 1) * p > best[i]) {
        best[i] = best[j] + (k - 1) * p;
        cut[i] = j;
      }
    }
  }
  std::vector<Group> groups;
  for (size_t i = n; i > 0; i = cut[i]) {
    Group g;
    g.prefix = Size(tokens[order[cut[i]]]);
    int64_t sum = 0;
    for (size_t j = cut[i]; j < i; ++j) {
      g.members.push_back(order[j]);
      sum += Size(tokens[order[j]]);
      if (j + 1 < i) g.prefix = std::min(g.prefix, next_common[j]);
    }
    if (g.members.size() == 1) g.prefix = sum;
    g.length = sum - static_cast<int64_t>(g.members.size() - 1) * g.prefix;
    groups.push_back(std::move(g));
  }
  for (Group& g : groups) std::sort(g.members.begin(), g.members.end());
  std::sort(groups.begin(), groups.end(),
            [](const Group& a, const Group& b) { return a.members.front() < b.members.front(); });

  LoopPacking out;
  out.rows = static_cast<int64_t>(groups.size());
  out.width = 1;
  bool shared = false;
  for (const Group& g : groups) {
    out.width = std::max(out.width, g.length);
    out.fed += g.length;
    shared = shared || g.members.size() > 1;
  }
  const int64_t t = out.width;
  out.ids.assign(static_cast<size_t>(out.rows * t), 0);
  out.positions.assign(static_cast<size_t>(out.rows * t), 0);
  if (shared) out.mask.assign(static_cast<size_t>(out.rows * t * t), -std::numeric_limits<float>::infinity());

  // Per datum: the flat index of its first prefix token and of its tail.
  std::vector<int64_t> prefix_at(tokens.size()), tail_at(tokens.size()), prefix_len(tokens.size());
  for (int64_t r = 0; r < out.rows; ++r) {
    const Group& g = groups[static_cast<size_t>(r)];
    const int64_t base = r * t, p = g.prefix;
    const std::vector<int64_t>& first = tokens[g.members.front()];
    for (int64_t k = 0; k < p; ++k) {
      out.ids[static_cast<size_t>(base + k)] = first[static_cast<size_t>(k)];
      out.positions[static_cast<size_t>(base + k)] = k;
    }
    auto see = [&](int64_t q, int64_t from, int64_t to) {  // query q sees keys from..to-1
      float* row = out.mask.data() + (base + q) * t;
      std::fill(row + from, row + to, 0.0f);
    };
    if (shared) {
      for (int64_t q = 0; q < p; ++q) see(q, 0, q + 1);
    }
    int64_t at = p;
    for (size_t m : g.members) {
      const std::vector<int64_t>& x = tokens[m];
      prefix_at[m] = base;
      prefix_len[m] = p;
      tail_at[m] = base + at;
      for (int64_t k = p; k < Size(x); ++k, ++at) {
        out.ids[static_cast<size_t>(base + at)] = x[static_cast<size_t>(k)];
        out.positions[static_cast<size_t>(base + at)] = k;
        if (shared) {
          see(at, 0, p);
          see(at, tail_at[m] - base, at + 1);  // its own tail, causally
        }
      }
    }
    if (shared) {
      for (int64_t q = at; q < t; ++q) see(q, 0, q + 1);  // padding: causal, so no row is all -inf
    }
  }
  for (size_t d = 0; d < tokens.size(); ++d) {
    for (int64_t k = 0; k < Size(tokens[d]); ++k) {
      out.token_rows.push_back(k < prefix_len[d] ? prefix_at[d] + k : tail_at[d] + (k - prefix_len[d]));
    }
  }
  return out;
}

}  // namespace burst
