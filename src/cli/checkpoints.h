// `burst checkpoints list|download`: a job's checkpoints, and one of them as
// the folder GET .../checkpoints/{ckpt}/content streams (a tar, downloaded
// to a file and unpacked from it with libarchive, entry by entry, refusing
// absolute paths, '..' and links).
//
// Thread-safety: registers subcommands; runs on the main thread.
#pragma once

#include <filesystem>
#include <vector>

namespace CLI {
class App;
}

namespace burst {

void AddCheckpointsCommand(CLI::App& app, int* rc);

// Unpacks a tar file under `dir`, each entry streamed to its file; the paths
// it wrote, in order. Throws burst::Error (kInvalidArgument naming the
// entry) for an absolute path, a '..' or anything but plain files and folders.
std::vector<std::filesystem::path> UnpackTarFile(const std::filesystem::path& tar,
                                                 const std::filesystem::path& dir);

}  // namespace burst
