// Limits of a sampling call that the API checks on the way in and the
// engine checks again where it samples (one number for both sides; the API
// does not link libtorch).
#pragma once

#include <cstdint>

namespace burst {

// Alternatives per token (chat's top_logprobs, the completions' logprobs).
inline constexpr int64_t kMaxTopLogprobs = 20;
// Token ids in a prompt given as ids (the model's context bounds it further).
inline constexpr int64_t kMaxPromptIds = 131072;

}  // namespace burst
