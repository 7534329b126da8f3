// Sampling requests (POST /v1/completions and /v1/chat/completions, OpenAI's
// shapes; docs/api.md, "Sampling").
//
// ParseSampleRequest checks the body field by field (errors name the field;
// OpenAI fields Burst does not implement are 400 unless they hold their
// no-op value) and returns what a worker needs. ResolveSampleModel finds what
// `model` names for the caller's organisation: a checkpoint (`JOB:step-N` or
// its id `ftckpt-...`), always exactly that checkpoint, or a base model.
// model/sample_render.h turns a worker's samples into the response objects.
//
// Thread-safety: stateless. Errors: throw burst::Error.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/checkpoint_names.h"
#include "core/json.h"
#include "db/metadata.h"

namespace burst {

class ObjectStore;

// `chat`: /v1/chat/completions (messages) rather than /v1/completions (prompt).
Json ParseSampleRequest(const Json& body, bool chat);

struct SampleTarget {
  std::string base_model;         // resolved folder
  std::string checkpoint_prefix;  // the sampler folder in the store ("" = the base model itself)
  bool full = false;              // a full fine-tune's weights, not an adapter
};

// A training loop's sampler checkpoint (tinker://RUN/sampler_weights/NAME)
// too, read from `store`: its adapter names its base model.
SampleTarget ResolveSampleModel(const std::string& model, const std::string& org_id, Metadata& md,
                                const std::vector<std::filesystem::path>& model_roots,
                                const ObjectStore* store = nullptr);

}  // namespace burst
