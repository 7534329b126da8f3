// Weights that leave: GET /v1/fine_tuning/jobs/{job}/checkpoints/{ckpt}/content
// streams a checkpoint's sampler folder as a tar (libarchive, POSIX pax),
// ready for PEFT, `burst sample --model` or `burst export`:
//
//   NAME/adapter_config.json   base_model_name_or_path is the model's catalog
//                              name, never a server folder
//   NAME/adapter_model.safetensors (or a full fine-tune's weights and tokenizer)
//   NAME/README.md             the model card: base model, data (name,
//                              sha256, examples), recipe, eval against the
//                              base model, and the base model's NOTICE
//   NAME/manifest.json         sha256 and size of each file as shipped
//
// What the organisation named (a file, the model, the suffix, the recipe's
// strings) shows in the card as written and forms no Markdown of its own:
// no raw HTML, link or table cell.
//
// NAME is JOB-step-N (no ':' in file names). `ckpt` is the checkpoint's id
// (ftckpt-...) or its step. The store's files are fetched to a temporary
// folder first, so a store error is a clean 4xx/5xx before any byte is sent.
//
// Thread-safety: stateless; runs on the request's thread.
#pragma once

#include <string>

#include "core/json.h"
#include "db/metadata.h"

namespace burst {

struct ApiContext;
class Routes;

void AddCheckpointDownloadRoute(ApiContext& ctx, Routes& routes);

// The model card (README.md) of a job's checkpoint. `train` / `valid`: the
// job's data files (valid may be absent); `notice`: the base model's NOTICE
// file ("" when it has none).
std::string ModelCard(const JobRecord& job, const CheckpointRecord& cp, const std::string& name,
                      const FileRecord* train, const FileRecord* valid, const std::string& notice);

}  // namespace burst
