#include "core/alloc.h"

#include <malloc.h>

namespace burst {

void TuneAllocator() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);  // blocks below 256 MB come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);    // keep up to 1 GB of freed heap
  mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace burst
