// Random identifiers and secrets.
//
// Ids look like OpenAI's ("ftjob-", "file-" ...) followed by 24 lowercase
// base-32 characters (120 random bits), so they are unguessable, safe in URLs
// and object-store keys, and sort no differently from one another. Secrets
// (API keys, worker tokens) carry 256 random bits. Randomness comes from
// OpenSSL's CSPRNG.
//
// Thread-safety: safe from any thread. Errors: throw burst::Error (kInternal)
// if the system has no randomness, which does not happen on Linux.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace burst {

// "<prefix>-" + 24 random base-32 characters.
std::string NewId(const std::string& prefix);
// "<prefix>-" + 52 random base-32 characters (256 bits).
std::string NewSecret(const std::string& prefix);
// A random sampling seed in [0, 2^31): what a call that names none samples with.
int64_t NewSeed();

// Whether a secret a client gave is the one expected, in a time that tells
// nothing of either: their sha256 digests compared with CRYPTO_memcmp, so
// neither the first differing byte nor the expected length shows.
bool SameSecret(std::string_view given, std::string_view want);

}  // namespace burst
