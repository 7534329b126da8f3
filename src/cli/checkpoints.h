// `burst checkpoints list|download`: a job's checkpoints, and one of them as
// the folder GET .../checkpoints/{ckpt}/content streams (a tar, unpacked
// here with libarchive, refusing absolute paths, '..' and links).
//
// Thread-safety: registers subcommands; runs on the main thread.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace burst {

void AddCheckpointsCommand(CLI::App& app, int* rc);

// Unpacks a tar held in memory under `dir`; the paths it wrote, in order.
// Throws burst::Error (kInvalidArgument naming the entry) for an absolute
// path, a '..' or anything but plain files and folders.
std::vector<std::filesystem::path> UnpackTar(std::string_view tar, const std::filesystem::path& dir);

}  // namespace burst
