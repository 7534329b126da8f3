// sbatch's script file (runtime/slurm_client.h): it holds a worker's token,
// so no one but this user may read it at any moment, whatever the umask,
// and no file someone else put at its path is written into.
#include "runtime/slurm_client.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>

#include "core/fs.h"
#include "runtime/slurm_executor.h"

namespace burst {
namespace {

class BatchScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("burst-slurm-client-test");
    umask_ = ::umask(0);  // the loosest umask: a file created without a mode of its own is 0666
  }
  void TearDown() override {
    ::umask(umask_);
    std::filesystem::remove_all(dir_);
  }
  // The permission bits of `path`, or -1 when it does not exist.
  static int ModeOf(const std::filesystem::path& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
  }

  std::filesystem::path dir_;
  mode_t umask_ = 022;
};

TEST_F(BatchScriptTest, IsTheUsersOnly) {
  const std::filesystem::path path = dir_ / "w.sh";
  ASSERT_TRUE(WriteBatchScript(path, "#!/bin/sh\nexport BURST_WORKER_TOKEN=secret\n").ok());
  EXPECT_EQ(ModeOf(path), 0600);
  EXPECT_EQ(ReadFile(path), "#!/bin/sh\nexport BURST_WORKER_TOKEN=secret\n");
}

// A write that fails half way (here: past the file size limit) leaves no
// file, and none that others could read in the meantime.
TEST_F(BatchScriptTest, AFailedWriteLeavesNothingReadable) {
  const std::filesystem::path path = dir_ / "w.sh";
  const std::string script(1 << 20, 'x');
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status s = WriteBatchScript(path, script);
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(s.ok());
  const int mode = ModeOf(path);
  EXPECT_TRUE(mode == -1 || (mode & 077) == 0) << "left behind with mode 0" << std::oct << mode;
  EXPECT_EQ(mode, -1) << "a partial script is removed";
}

// A file already at the path (in a shared temp folder: maybe another
// user's) is refused, never written into.
TEST_F(BatchScriptTest, AnExistingFileIsNotWrittenInto) {
  const std::filesystem::path path = dir_ / "w.sh";
  WriteFileAtomic(path, "theirs");
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  EXPECT_FALSE(WriteBatchScript(path, "export BURST_WORKER_TOKEN=secret\n").ok());
  EXPECT_EQ(ReadFile(path), "theirs");
  std::filesystem::remove(path);
  ASSERT_EQ(::symlink((dir_ / "elsewhere").c_str(), path.c_str()), 0);
  EXPECT_FALSE(WriteBatchScript(path, "export BURST_WORKER_TOKEN=secret\n").ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "elsewhere")) << "followed a symlink";
}

TEST(SlurmGres, ANodesGpusAreCountedByTypeAndOtherGresLeftOut) {
  std::map<std::string, int64_t> n;
  AddGresGpus("gpu:h100:4(S:0-1),gpu:l40s:1,shard:8", &n);
  AddGresGpus("gpu:h100:2(S:0,1)", &n);
  AddGresGpus("gpu:2", &n);
  AddGresGpus("(null)", &n);
  AddGresGpus("gpu:h100:x,gpu::3", &n);
  EXPECT_EQ(n, (std::map<std::string, int64_t>{{"h100", 6}, {"l40s", 1}, {"gpu", 2}}));
  const auto slots = GpuSlotsOf({{"h100", 2}}, "partition gpu");
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[1].index, 1);
  EXPECT_EQ(slots[1].type, "h100");
}

TEST(SlurmGres, AGpuWorkerAsksForItsTypeAndCountAndACpuWorkerForNoGpu) {
  const WorkerLaunch cpu("w", "t", 0, 1);
  const WorkerLaunch gpu("w", "t", -1, 1, "a100-80gb", {GpuSlot{}, GpuSlot{}});
  EXPECT_EQ(WorkerGres("", cpu), "");
  EXPECT_EQ(WorkerGres("gpu:1,nic:1", cpu), "nic:1") << "a CPU worker holds no GPU idle";
  EXPECT_EQ(WorkerGres("", gpu), "gpu:a100-80gb:2");
  EXPECT_EQ(WorkerGres("gpu:1,nic:1", gpu), "nic:1,gpu:a100-80gb:2");
}

}  // namespace
}  // namespace burst
