// Process-wide allocator settings for training and sampling processes.
//
// glibc returns every freed block above 32 MB (and trims the heap top) to the
// OS; a training step frees and reallocates the same activation buffers each
// step, so each step page-faults them in again. TuneAllocator() raises those
// thresholds. Call once at the start of main(), before any threads exist.
#pragma once

namespace burst {

void TuneAllocator();

}  // namespace burst
