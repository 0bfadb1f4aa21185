// The `doorbell` command-line program.
#include <CLI/CLI.hpp>

#include "tools/demo.h"
#include "tools/devices.h"

int main(int argc, char** argv) {
  CLI::App app{"doorbell: GPU-initiated communication (IBGDA / NVLS / P2P) simulation and verification"};
  app.require_subcommand(1);

  doorbell::tools::DemoOptions demo;
  CLI::App* d = app.add_subcommand("demo", "drive the software mlx5 NIC with IBGDA-style batches and report");
  d->add_option("--wqes", demo.wqes, "RDMA WRITEs to execute")->check(CLI::PositiveNumber);
  d->add_option("--size", demo.size, "bytes per WRITE")->check(CLI::Range(1u, 1u << 20));
  d->add_option("--batch", demo.batch, "WQEs per doorbell (one CQ_UPDATE each)");
  d->add_option("--log-sq", demo.log_sq, "log2 of the send ring size in WQEBBs");
  d->add_flag("--cross-nic", demo.cross_nic, "connect to a QP on a second NIC model");

  doorbell::tools::DevicesOptions dev;
  CLI::App* v = app.add_subcommand("devices", "list RDMA devices with their ports and capabilities");
  v->add_option("--hca-list", dev.hca_list, "keep these devices (mlx5_0:1,mlx5_1) or exclude them (^mlx5_2)");
  v->add_option("--near-gpu", dev.near_gpu, "PCI bus id or sysfs path of a GPU: report the closest device");

  CLI11_PARSE(app, argc, argv);
  if (d->parsed()) return doorbell::tools::run_demo(demo);
  if (v->parsed()) return doorbell::tools::run_devices(dev);
  return 0;
}
