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

}  // namespace burst
