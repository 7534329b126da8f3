// File helpers: whole-file reads, atomic writes, sha256 digests.
//
// WriteFileAtomic writes a temp file beside the target, fsyncs it, renames it
// over the target and fsyncs the folder, so a reader sees either the old file
// or the whole new one, even across a crash. Checkpoint manifests rely on it.
//
// Errors: throw burst::Error (kNotFound, kDataLoss, kInternal) naming the path.
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/status.h"

namespace burst {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path);
void WriteFileAtomic(const fs::path& path, std::string_view data);
// fsync a file or a folder by path (no-op where the platform refuses).
void SyncPath(const fs::path& path);

std::string Sha256Hex(std::string_view data);
std::string Sha256File(const fs::path& path);

// A fresh, empty folder under the system temp dir; removed by the caller.
fs::path MakeTempDir(const std::string& prefix);

// An I/O failure (errno `err`) as a Status naming the path: a full disk or
// quota (ENOSPC, EDQUOT) is kResourceExhausted "disk full: WHAT PATH: ...",
// which retrying does not fix until someone frees space; anything else is
// `otherwise`.
Status IoStatus(int err, const std::string& what, const fs::path& path, Code otherwise);
bool IsDiskFull(int err);

// Creates `dir` and the missing folders above it with permission bits
// `mode` (0700: the server's user only); folders that exist are left as
// they are. Throws burst::Error naming the folder.
void CreateDirectories(const fs::path& dir, unsigned mode);
// Clears the permission bits of an existing file or folder that `mode` does
// not allow (never adds any), saying so on stderr with both modes: files an
// earlier, looser version created are tightened at start. True when it
// changed them; false when they were tight already or the path is missing.
bool RestrictMode(const fs::path& path, unsigned mode);

}  // namespace burst
