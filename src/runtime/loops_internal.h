// What the files of Loops share (loops.cpp, loops_sessions.cpp, loops_recover.cpp).
#pragma once

#include <cstdint>

#include "runtime/loops.h"

namespace burst {

// The bytes a request's packed op holds of its organisation's share.
inline int64_t PayloadBytes(const LoopPayload& p) { return p ? static_cast<int64_t>(p->size()) : 0; }

}  // namespace burst
