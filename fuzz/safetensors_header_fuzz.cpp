// Safetensors files (uploaded or downloaded models, checkpoints): the 8-byte
// length and JSON header, every entry checked against the file size. What
// the parser accepts, the torch reader trusts, so check it here.
#include "fuzz_util.h"
#include "model/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace burst;
  SafetensorsHeader h;
  try {
    h = ParseSafetensorsBytes(fuzz::Text(data, size), "fuzz.safetensors");
  } catch (const Error&) {
    return 0;
  }
  fuzz::Expect(h.data_start + h.data_size == size, "data section does not end the file");
  for (const SafetensorsEntry& e : h.tensors) {
    fuzz::Expect(e.begin <= e.end && e.end <= h.data_size, "tensor bytes outside the data section");
    fuzz::Expect(e.numel * e.element_bytes == e.end - e.begin, "tensor size disagrees with its bytes");
    uint64_t numel = 1;
    for (int64_t d : e.shape) {
      fuzz::Expect(d >= 0, "negative dimension");
      numel *= static_cast<uint64_t>(d);
    }
    fuzz::Expect(numel == e.numel, "numel is not the shape's product");
  }
  return 0;
}
