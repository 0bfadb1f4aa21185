#include "tools/devices.h"

#include <cstdio>
#include <vector>

#include "hw/mlx5_devx/discovery.h"

namespace doorbell::tools {

namespace {
const char* mtu_text(uint8_t m) {
  static const char* k[] = {"?", "256", "512", "1024", "2048", "4096"};
  return m <= 5 ? k[m] : "?";
}
}  // namespace

int run_devices(const DevicesOptions& o) {
  const devx::Discovery d = devx::discover_devices();
  if (d.devices.empty()) {
    std::fprintf(stderr, "doorbell devices: no RDMA device found (looked for: %s)\n", d.looked_for.c_str());
    return 1;
  }
  std::vector<std::string> names;
  for (const auto& l : d.devices) names.push_back(l.info.name);
  Result<std::vector<std::string>> keep = devx::filter_devices(names, o.hca_list);
  if (!keep) {
    std::fprintf(stderr, "doorbell devices: %s\n", keep.status().message().c_str());
    return 1;
  }
  if (keep->empty()) {
    std::fprintf(stderr, "doorbell devices: no RDMA device matches HCA list '%s' (%zu found)\n", o.hca_list.c_str(), names.size());
    return 1;
  }
  std::vector<std::pair<std::string, std::string>> candidates;
  for (const auto& l : d.devices) {
    bool kept = false;
    for (const auto& k : *keep) kept |= k == l.info.name;
    if (!kept) continue;
    const auto& i = l.info;
    if (!l.error.empty()) {
      std::printf("%-10s  cannot open: %s\n", i.name.c_str(), l.error.c_str());
      continue;
    }
    candidates.push_back({i.name, i.pci_path});
    std::printf("%-10s  provider %-5s  DEVX %-3s  max_qp %u  max_cq %u  max_qp_wr %u  atomics %s  pci %s\n", i.name.c_str(),
                i.provider.c_str(), i.devx ? "yes" : "no", i.max_qp, i.max_cq, i.max_qp_wr, i.atomics ? "yes" : "no",
                i.pci_path.empty() ? "-" : i.pci_path.c_str());
    for (const auto& p : l.ports) {
      char gid[48];
      std::snprintf(gid, sizeof gid, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", p.gid[0],
                    p.gid[1], p.gid[2], p.gid[3], p.gid[4], p.gid[5], p.gid[6], p.gid[7], p.gid[8], p.gid[9], p.gid[10],
                    p.gid[11], p.gid[12], p.gid[13], p.gid[14], p.gid[15]);
      std::printf("  port %u  %-6s  %-10s  lid %u  gid %s  mtu %s\n", p.port, p.up ? "ACTIVE" : "DOWN",
                  p.ethernet ? "Ethernet" : "InfiniBand", p.lid, gid, mtu_text(p.active_mtu));
    }
  }
  if (!o.near_gpu.empty()) {
    std::string gpu = o.near_gpu;
    if (gpu.find('/') == std::string::npos) gpu = "/sys/bus/pci/devices/" + gpu;
    char buf[4096];
    if (realpath(gpu.c_str(), buf) != nullptr) gpu = buf;
    std::printf("closest to %s: %s\n", gpu.c_str(), devx::closest_by_pci(candidates, gpu).c_str());
  }
  return 0;
}

}  // namespace doorbell::tools
