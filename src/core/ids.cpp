#include "core/ids.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <vector>

#include "core/fs.h"
#include "core/status.h"

namespace burst {
namespace {

std::string RandomBase32(size_t chars) {
  static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  std::vector<unsigned char> bytes(chars);
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    throw Error(Code::kInternal, "no randomness available (RAND_bytes failed)");
  }
  std::string out(chars, 'a');
  for (size_t i = 0; i < chars; ++i) out[i] = kAlphabet[bytes[i] & 31];  // 5 bits each
  return out;
}

}  // namespace

std::string NewId(const std::string& prefix) { return prefix + "-" + RandomBase32(24); }
std::string NewSecret(const std::string& prefix) { return prefix + "-" + RandomBase32(52); }

int64_t NewSeed() {
  unsigned char bytes[4];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    throw Error(Code::kInternal, "no randomness available (RAND_bytes failed)");
  uint32_t v = 0;
  for (unsigned char b : bytes) v = (v << 8) | b;
  return static_cast<int64_t>(v & 0x7fffffffu);
}

bool SameSecret(std::string_view given, std::string_view want) {
  const std::string a = Sha256Hex(given), b = Sha256Hex(want);
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace burst
