// UTF-8 checks for every string that enters the database or a response.
//
// JSON responses must be valid UTF-8 (nlohmann's dump throws otherwise), so
// a client's bytes are validated where they come in (a filename, a header
// value) and refused with 400, and text Burst did not write itself (a parse
// error that quotes the bad bytes) is repaired before it is sent.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace burst {

// The byte offset of the first byte that does not start or continue a
// well-formed UTF-8 sequence (RFC 3629: no overlongs, no surrogates, nothing
// past U+10FFFF), or nullopt when `s` is valid.
std::optional<size_t> InvalidUtf8At(std::string_view s);
inline bool IsValidUtf8(std::string_view s) { return !InvalidUtf8At(s).has_value(); }

// `s` with each ill-formed sequence replaced by U+FFFD.
std::string ToValidUtf8(std::string_view s);

}  // namespace burst
