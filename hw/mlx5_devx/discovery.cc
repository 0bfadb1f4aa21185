#include "hw/mlx5_devx/discovery.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdlib>
#include <sstream>

namespace doorbell::devx {

std::string sysfs_root() {
  const char* s = std::getenv("SYSFS_PATH");  // libibverbs honours the same variable
  return s != nullptr ? s : "/sys";
}

std::string pci_path_of(const std::string& dev) {
  char buf[PATH_MAX];
  const std::string link = sysfs_root() + "/class/infiniband/" + dev + "/device";
  return realpath(link.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

Discovery discover_devices() {
  Discovery d;
  d.looked_for = "libibverbs device list (ibv_get_device_list) under " + sysfs_root() + "/class/infiniband";
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    d.looked_for += std::string("; the list call failed: ") + std::strerror(errno) + " (no RDMA support in this kernel?)";
    return d;
  }
  for (int i = 0; i < n; ++i) {
    DeviceListing l;
    l.info.name = ibv_get_device_name(list[i]);
    Result<std::unique_ptr<DevxContext>> ctx = open_device(l.info.name);
    if (!ctx) {
      l.error = ctx.status().message();
    } else {
      l.info = (*ctx)->info();
      for (uint8_t p = 1; p <= l.info.ports; ++p)
        if (Result<PortInfo> pi = (*ctx)->query_port(p)) l.ports.push_back(*pi);
    }
    d.devices.push_back(std::move(l));
  }
  ibv_free_device_list(list);
  return d;
}

Result<std::vector<std::string>> filter_devices(const std::vector<std::string>& names, const std::string& hca_list) {
  if (hca_list.empty()) return names;
  const bool exclude = hca_list[0] == '^';
  std::vector<std::string> listed;
  std::stringstream ss(exclude ? hca_list.substr(1) : hca_list);
  for (std::string item; std::getline(ss, item, ',');) {
    item = item.substr(0, item.find(':'));  // "mlx5_0:1" names port 1 of mlx5_0
    if (!item.empty()) listed.push_back(item);
  }
  std::vector<std::string> out;
  for (const std::string& n : names)
    if ((std::find(listed.begin(), listed.end(), n) != listed.end()) != exclude) out.push_back(n);
  if (!exclude)
    for (const std::string& l : listed)
      if (std::find(names.begin(), names.end(), l) == names.end())
        return Status(Errc::kNotFound, "HCA list names " + l + ", which is not among the devices found");
  return out;
}

std::string closest_by_pci(const std::vector<std::pair<std::string, std::string>>& candidates, const std::string& gpu) {
  std::string best;
  long best_score = -1;
  for (const auto& [name, path] : candidates) {
    // Shared prefix counted in whole path components (bridges), not characters.
    long score = 0;
    size_t i = 0;
    while (i < path.size() && i < gpu.size() && path[i] == gpu[i]) {
      if (path[i] == '/') ++score;
      ++i;
    }
    if ((i == path.size() || path[i] == '/') && (i == gpu.size() || gpu[i] == '/')) ++score;
    if (score > best_score) best_score = score, best = name;
  }
  return best;
}

}  // namespace doorbell::devx
