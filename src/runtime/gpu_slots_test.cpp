// GPU slots (gpu_slots.h): type names from device names, nvidia-smi's
// listing, and --gpus.
#include "runtime/gpu_slots.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

TEST(GpuSlots, TypesAreTheShortNamesRequestsUse) {
  EXPECT_EQ(GpuTypeFromName("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(GpuTypeFromName("NVIDIA H100 PCIe"), "h100");
  EXPECT_EQ(GpuTypeFromName("NVIDIA H200"), "h200");
  EXPECT_EQ(GpuTypeFromName("NVIDIA A100-SXM4-80GB"), "a100-80gb");
  EXPECT_EQ(GpuTypeFromName("NVIDIA A100-PCIE-40GB"), "a100-40gb");
  EXPECT_EQ(GpuTypeFromName("NVIDIA L40S"), "l40s");
  EXPECT_EQ(GpuTypeFromName("NVIDIA L4"), "l4");
  EXPECT_EQ(GpuTypeFromName("NVIDIA A10G"), "a10g");
  EXPECT_EQ(GpuTypeFromName("Tesla T4"), "t4");
  EXPECT_EQ(GpuTypeFromName("Tesla V100-SXM2-16GB"), "v100");
  EXPECT_EQ(GpuTypeFromName("NVIDIA B200"), "b200");
  EXPECT_EQ(GpuTypeFromName("NVIDIA GeForce RTX 4090"), "rtx-4090");
  EXPECT_EQ(GpuTypeFromName("NVIDIA RTX A6000"), "rtx-a6000");
  EXPECT_EQ(GpuTypeFromName(""), "gpu");
  EXPECT_LE(GpuTypeFromName(std::string(200, 'x') + " y").size(), 32u);
}

TEST(GpuSlots, ReadsNvidiaSmisListingAndNamesABadLine) {
  auto gpus = ParseGpuListing(
      "0, GPU-1a2b, NVIDIA H100 80GB HBM3\n1, GPU-3c4d, NVIDIA H100 80GB HBM3\n2, GPU-5e6f, NVIDIA L40S\n\n");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus.value().size(), 3u);
  EXPECT_EQ(gpus.value()[1].index, 1);
  EXPECT_EQ(gpus.value()[1].uuid, "GPU-3c4d");
  EXPECT_EQ(gpus.value()[1].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus.value()[2].type, "l40s");
  EXPECT_EQ(DescribeGpus(gpus.value()), "2 x h100, 1 x l40s");
  auto bad = ParseGpuListing("0, GPU-1, NVIDIA H100\nNo devices were found\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().ToString();
}

TEST(GpuSlots, TheGpusFlagTakesAllNoneOrIndices) {
  const std::vector<GpuSlot> seen = {{0, "h100", "NVIDIA H100", "GPU-a"},
                                     {1, "h100", "NVIDIA H100", "GPU-b"},
                                     {2, "l40s", "NVIDIA L40S", "GPU-c"}};
  EXPECT_EQ(ChooseGpus("all", seen).value().size(), 3u);
  EXPECT_TRUE(ChooseGpus("none", seen).value().empty());
  auto two = ChooseGpus("2,0", seen);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two.value().size(), 2u);
  EXPECT_EQ(two.value()[0].type, "l40s");
  for (const char* bad : {"3", "0,0", "x", "0,", "-1"}) {
    auto r = ChooseGpus(bad, seen);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().param(), "gpus") << bad;
  }
  EXPECT_NE(ChooseGpus("0", {}).status().message().find("no GPUs"), std::string::npos);
}

TEST(GpuSlots, ADevicesPriceIsItsSlotsOrItsGpusTimesTheirTypes) {
  const std::map<std::string, double> gpu = {{"h100", 0.001}};
  EXPECT_DOUBLE_EQ(DevicePricePerSecond(DeviceClaim{}, 0.5, gpu).value(), 0.5);
  EXPECT_DOUBLE_EQ(DevicePricePerSecond(DeviceClaim{"h100", 2}, 0.5, gpu).value(), 0.002);
  EXPECT_FALSE(DevicePricePerSecond(DeviceClaim{"l40s", 1}, 0.5, gpu).has_value())
      << "no price: none made up";
}

}  // namespace
}  // namespace burst
