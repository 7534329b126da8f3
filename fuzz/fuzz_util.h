// Shared by the fuzz targets: input bytes as text, and invariant checks.
//
// A target catches burst::Error only, the documented way a parser refuses
// bad input; any other exception escapes to libFuzzer and counts as a crash,
// as do sanitizer reports and failed Expect()s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/status.h"

namespace burst::fuzz {

inline std::string_view Text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// An invariant the parser promises; abort() makes libFuzzer save the input.
inline void Expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

// Texts a tokenizer loaded from fuzzed bytes encodes: ASCII, spaces and
// newlines, multi-byte UTF-8, invalid UTF-8, a chat-template special token.
inline constexpr std::string_view kSampleTexts[] = {
    "Hello, world! The ticket number is 12345.",
    "  leading and  double  spaces\n\ttabs\r\nand lines ",
    "caf\xc3\xa9 \xe2\x96\x81 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 \xef\xbc\xa1",
    "\xff\xfe broken \xc3 utf-8 \xed\xa0\x80",
    "<|im_start|>user\nhi<|im_end|>",
    "",
};

}  // namespace burst::fuzz
