// Device selection logic (no device needed): HCA-list filtering and PCI proximity.
#include "hw/mlx5_devx/discovery.h"

#include <gtest/gtest.h>

namespace doorbell::devx {
namespace {

TEST(Discovery, HcaListIncludesExcludesAndRejectsTypos) {
  const std::vector<std::string> found = {"mlx5_0", "mlx5_1", "mlx5_2"};
  EXPECT_EQ(*filter_devices(found, ""), found);
  EXPECT_EQ(*filter_devices(found, "mlx5_2:1,mlx5_0"), (std::vector<std::string>{"mlx5_0", "mlx5_2"}));
  EXPECT_EQ(*filter_devices(found, "^mlx5_1"), (std::vector<std::string>{"mlx5_0", "mlx5_2"}));
  Result<std::vector<std::string>> typo = filter_devices(found, "mlx5_9");
  EXPECT_EQ(typo.status().code(), Errc::kNotFound);
  EXPECT_NE(typo.status().message().find("mlx5_9"), std::string::npos);
}

TEST(Discovery, ClosestByPciPrefersTheSharedSwitch) {
  const std::string gpu = "/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:02.0/0000:45:00.0";
  const std::vector<std::pair<std::string, std::string>> nics = {
      {"mlx5_0", "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0"},
      {"mlx5_1", "/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:01.0/0000:43:00.0"},
      {"mlx5_2", "/sys/devices/pci0000:40/0000:40:03.1/0000:48:00.0"},
  };
  EXPECT_EQ(closest_by_pci(nics, gpu), "mlx5_1");
  EXPECT_EQ(closest_by_pci({}, gpu), "");
}

TEST(Discovery, OpeningAMissingDeviceIsAClearError) {
  Result<std::unique_ptr<DevxContext>> r = open_device("mlx5_does_not_exist");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("no RDMA device"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace doorbell::devx
