// Datums that share a prefix, packed into one row of a forward pass.
//
// RL data repeats its prompts: a group of completions of one prompt is a
// group of datums that agree on their first hundred tokens and differ in the
// last few. Fed one datum per row, the model computes each prompt once per
// completion. Packed, a row holds the shared prefix once and then each
// datum's tail; positions restart at the prefix's end for every tail, and
// the attention mask lets a tail see the prefix and itself, never another
// tail. Each datum token then reads its log-probability from the packed
// row's hidden state at its place, so every datum gets what it would get in
// a row of its own (up to float rounding: other matrix shapes).
//
// The packing is a function of the tokens alone, so a request replayed on
// another worker packs, and computes, the same.
#pragma once

#include <cstdint>
#include <vector>

namespace burst {

struct LoopPacking {
  int64_t rows = 0, width = 0;     // G packed rows of T tokens (padded)
  std::vector<int64_t> ids;        // (G*T) token ids; padding is 0
  std::vector<int64_t> positions;  // (G*T) each token's position in its datum
  // (G*T*T) 0 where query i of a row may see key j, -inf elsewhere; empty
  // when no row holds more than one datum (every row plainly causal).
  std::vector<float> mask;
  std::vector<int64_t> token_rows;  // (N) per datum token, in datum order: its flat index into (G*T)
  int64_t fed = 0;                  // tokens the rows hold (N minus what sharing saved)
};

// Sorts the datums' tokens, groups neighbours whose common prefix is at
// least min_shared tokens and half of each member (a row's attention spans
// all of it: sharing less saves less than the wider rows cost) while a row
// stays within max_width tokens (a datum longer than that gets a row of its
// own) and a newcomer does not shrink what the row saves (prompts that share
// only a system prompt stay apart), and lays the rows out; rows
// come in the order of their first datum, so data that shares nothing packs
// one datum per row in datum order.
LoopPacking PackLoopData(const std::vector<std::vector<int64_t>>& tokens, int64_t min_shared,
                         int64_t max_width);

}  // namespace burst
