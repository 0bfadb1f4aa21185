// `doorbell devices`: the RDMA devices this machine has, with ports and capabilities.
#pragma once

#include <string>

namespace doorbell::tools {

struct DevicesOptions {
  std::string hca_list;     // NVSHMEM_HCA_LIST style filter
  std::string near_gpu;     // PCI sysfs path or bus id of a GPU: also print the closest NIC
};

// Prints the listing; returns the exit status (1 when no device is found or none matches).
int run_devices(const DevicesOptions& o);

}  // namespace doorbell::tools
