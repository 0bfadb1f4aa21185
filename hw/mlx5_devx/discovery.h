// Finding and choosing RDMA devices: list them through libibverbs with ports and
// capabilities, filter by a user list (NVSHMEM_HCA_LIST style), pick the one closest to a
// GPU by PCI topology, and open one as a DevxContext (rdma_core_devx.cc).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hw/mlx5_devx/devx_context.h"

namespace doorbell::devx {

struct DeviceListing {
  DeviceInfo info;
  std::vector<PortInfo> ports;
  std::string error;  // why the device could not be opened or queried, if it could not
};

struct Discovery {
  std::vector<DeviceListing> devices;
  std::string looked_for;  // what was searched, for the "no RDMA device found" message
};

Discovery discover_devices();

// "mlx5_0:1,mlx5_3" keeps those devices (ports are accepted and ignored here); a leading
// '^' excludes the listed ones instead. An empty list keeps everything. Unknown names in an
// inclusive list are an error, so a typo does not silently select nothing.
Result<std::vector<std::string>> filter_devices(const std::vector<std::string>& names, const std::string& hca_list);

// Of (name, PCI sysfs path) candidates, the one sharing the longest PCI path prefix with the
// GPU's; ties keep list order. Empty when there are no candidates.
std::string closest_by_pci(const std::vector<std::pair<std::string, std::string>>& candidates, const std::string& gpu_pci_path);

// Open a device by name for DEVX (rdma-core). On a non-mlx5 provider the context opens but
// every DEVX operation answers "DEVX is not supported by provider ...".
Result<std::unique_ptr<DevxContext>> open_device(const std::string& name);

}  // namespace doorbell::devx
