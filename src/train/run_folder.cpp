#include "train/run_folder.h"

#include <cstdio>
#include <sstream>

#include "core/fs.h"
#include "model/cpu_threads.h"

namespace burst {

std::string FormatDuration(double s) {
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%dh%02dm", int(s / 3600), int(s / 60) % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof(buf), "%dm%02ds", int(s / 60), int(s) % 60);
  else
    std::snprintf(buf, sizeof(buf), "%.0fs", s);
  return buf;
}

// A base model whose tensors are this run's own (a full fine-tune updates them
// in place, so a cached model's are cloned).
LlamaModel CloneWeights(const LlamaModel& m) {
  torch::NoGradGuard no_grad;
  LlamaModel c = m;
  for (auto& [name, slot] : c.BaseWeightSlots())
    if (slot->defined()) *slot = slot->clone();
  for (auto& [name, slot] : c.LoraWeightSlots())
    if (slot->defined()) *slot = slot->clone();
  if (c.config.tie_word_embeddings) c.lm_head = c.embed;
  return c;
}

// Keeps metrics lines with step <= `step`; rewrites the file atomically.
void TruncateMetrics(const fs::path& path, int64_t step) {
  if (!fs::exists(path)) return;
  std::istringstream in(ReadFile(path));
  std::string line, kept;
  while (std::getline(in, line)) {
    try {
      Json j = Json::parse(line);
      if (j.value("step", int64_t{0}) <= step) kept += line + "\n";
    } catch (...) {
      // a torn last line from a kill: dropped
    }
  }
  WriteFileAtomic(path, kept);
}

std::string DescribeDiff(const Json& a, const Json& b) {
  std::string out;
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (!b.contains(it.key()) || b[it.key()] != *it) {
      out += (out.empty() ? "" : ", ") + it.key() + " (" +
             (b.contains(it.key()) ? b[it.key()].dump() : "unset") + " -> " + it->dump() + ")";
    }
  }
  return out;
}

// Refuses to resume, on the CPU, from the state in `dir` (its state.json
// `st`) when this process computes with another BLAS library or other
// kernels than it was written with; each error names the field and says
// how to get the recorded one.
void CheckSameBlas(const Json& st, const fs::path& dir) {
  if (const std::string library = BlasLibraryName();
      st.contains("blas_library") && st.value("blas_library", "") != library) {
    throw Error(Code::kFailedPrecondition,
                "checkpoint " + dir.string() + " was written with the BLAS library \"" +
                    st.value("blas_library", "?") + "\" (blas_library); this run has \"" +
                    (library.empty() ? "another BLAS" : library) +
                    "\", and exact resume needs the same one: resume it where libtorch computes with that "
                    "library (the same system libraries as the run that wrote it)",
                "blas_library");
  }
  if (const std::string blas = BlasCoreName(); st.contains("blas") && st.value("blas", "") != blas) {
    const std::string want = st.value("blas", "?");
    if (want.rfind("MKL ", 0) == 0) {
      throw Error(
          Code::kFailedPrecondition,
          "checkpoint " + dir.string() + " was written with the kernels of \"" + want +
              "\" (blas: MKL's and ATen's, chosen by the CPU's vendor and vector units); this run has \"" +
              (blas.empty() ? "another BLAS" : blas) +
              "\", and exact resume needs them equal: resume on a CPU of the same kind, or pin the "
              "kernels for both runs (MKL_CBWR, ATEN_CPU_CAPABILITY; for a job, in the environment of "
              "burst serve, which passes them to every worker, or with burst serve --worker-env)",
          "blas");
    }
    throw Error(
        Code::kFailedPrecondition,
        "checkpoint " + dir.string() + " was written with OpenBLAS's " + want +
            " kernels (blas); this run has " + (blas.empty() ? "another BLAS" : blas) +
            ", and exact resume needs them equal (set OPENBLAS_CORETYPE=" + want +
            "; for a job, in the environment of burst serve, which passes it to every worker, or with "
            "burst serve --worker-env OPENBLAS_CORETYPE=" +
            want + ")",
        "blas");
  }
}

}  // namespace burst
