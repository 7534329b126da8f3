// What the tokenizer targets check of any tokenizer they get: encoding
// yields ids inside the vocabulary, decoding any ids (including unknown
// ones) and the id <-> piece lookups stay inside it too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "model/tokenizer.h"

namespace burst::fuzz {

inline void CheckEncodeDecode(const Tokenizer& tok, std::string_view text) {
  const int n = tok.vocab_size();
  for (bool special : {false, true}) {
    std::vector<int> ids = tok.Encode(text, special);
    for (int id : ids) Expect(id >= 0 && id < n, "Encode returned an id outside the vocabulary");
    for (bool skip : {false, true}) tok.Decode(ids, skip);
  }
  tok.Decode({-1, n, n + 1000, 0}, false);  // unknown ids are skipped, never read
}

inline void CheckTokenizer(const Tokenizer& tok) {
  const int n = tok.vocab_size();
  Expect(n >= 0, "negative vocab_size");
  // A few ids from each end of the vocabulary.
  for (int id : {0, 1, 2, n / 2, n - 2, n - 1}) {
    if (id < 0 || id >= n) continue;
    const std::string piece = tok.IdToPiece(id);
    tok.IsSpecial(id);
    if (auto back = tok.PieceToId(piece)) Expect(*back >= 0 && *back < n, "PieceToId outside the vocabulary");
  }
  for (std::string_view text : kSampleTexts) CheckEncodeDecode(tok, text);
}

}  // namespace burst::fuzz
