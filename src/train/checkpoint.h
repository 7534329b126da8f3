// Checkpoints: atomic commit with a manifest, verification, discovery.
//
// A checkpoint folder is committed by writing its files first and then
// manifest.json (format, version, {file: {bytes, sha256}}) last, atomically.
// A folder without a valid manifest does not exist for readers; one whose
// files do not match their manifest is reported by name and skipped, so the
// previous checkpoint is used (docs/design.md, invariant 2).
//
// Layout: RUN/checkpoints/step-00000100/{sampler,state}/.
// Thread-safety: stateless functions. Errors: throw burst::Error or return Status.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace burst {

namespace fs = std::filesystem;

inline constexpr int kManifestVersion = 1;

// "step-00000100".
std::string StepDirName(int64_t step);
// Hashes every file under dir (recursively, except manifest.json) and
// writes dir/manifest.json last. `extra` is merged into the manifest.
void CommitManifest(const fs::path& dir, const std::string& format, const Json& extra = {});
// Checks the manifest and every file it lists (size and sha256).
Status VerifyManifest(const fs::path& dir, const std::string& expected_format = "");
// Steps that have a checkpoints/step-N folder, newest first (not verified).
std::vector<int64_t> ListCheckpointSteps(const fs::path& run_dir);
// Removes all but the newest `keep_last` step folders (0 = keep all).
void PruneCheckpoints(const fs::path& run_dir, int64_t keep_last);

}  // namespace burst
