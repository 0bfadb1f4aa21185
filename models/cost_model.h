// Simulated-time parameters for the CPU model's `timed` schedule. Every agent carries a
// clock that these costs advance; a reader of a shared word cannot proceed before the time
// that word was written (causality through per-address write times), and the scheduler runs
// the earliest agent next. Simulated durations and message rates therefore follow the
// protocol's real sequence of accesses, doorbells and NIC work; wall-clock time never enters.
//
// Defaults describe a Hopper GPU with a ConnectX-7 NIC. Each value says where it comes from;
// "assumption" marks an order-of-magnitude estimate to be tuned per system.
#pragma once

namespace doorbell::models {

struct CostModel {
  // One access of a GPU thread to a shared word (an L2 atomic, or an ordered load/store).
  // Assumption: a few hundred cycles at ~1.7 GHz.
  double gpu_access_ns = 100;
  // A doorbell store (st.mmio to the NIC's UAR over PCIe) until the NIC sees it. Assumption:
  // below a PCIe round trip (~1 us) since the write is posted.
  double doorbell_mmio_ns = 300;
  // NIC per-WQE processing. Assumption: ConnectX-7 is marketed at hundreds of millions of
  // messages per second; 5 ns per WQE = 200 M/s.
  double nic_wqe_ns = 5;
  // Wire bandwidth: ConnectX-7 NDR, 400 Gb/s = 50 bytes/ns (NVIDIA ConnectX-7 user manual).
  double wire_bytes_per_ns = 50;
  // The NIC reads payload from GPU memory over its PCIe Gen5 x16 link (ConnectX-7 user
  // manual): 32 GT/s x 16 lanes = 64 bytes/ns raw. Payload moves at min(wire, PCIe).
  double pcie_bytes_per_ns = 64;
  // CPU proxy (IBRC-style): the host thread picks up each request the GPU published and
  // posts it. Per request. Assumption: ~1 us, the usual cost of CPU-proxied GPU networking.
  double proxy_post_ns = 1000;
  // One failed iteration of a polling loop.
  double poll_ns = 50;
  // A copy engine moving a peer copy over NVLink (cudaMemcpyAsync between two GPUs): about
  // 395 GB/s one way measured between two H200s of one host (issue 11); 0.4 bytes/ns per GB/s.
  double nvlink_bytes_per_ns = 395;
  // Opening a peer's allocation through CUDA IPC (cuIpcOpenMemHandle): the seed's ~90 us per
  // open (SPEC §6, seed 001), hence the receiver's handle cache.
  double ipc_open_ns = 90000;
  // NVLS through the NVSwitch: each GPU's link to the switch carries nvlink_bytes_per_ns per
  // direction, of which multimem traffic gets this share — NCCL's own tuning model uses 0.85 for
  // Hopper (nvlsEfficiency in its tuner).
  double nvls_efficiency = 0.85;
  // A GPU copying within its own memory (NVLS scatter / gather of a slot): H100 SXM HBM3 is
  // 3.35 TB/s, and a copy reads and writes each byte.
  double hbm_bytes_per_ns = 3350;
  // What one CTA moves, however wide the links: core/nvls's copy loop (move_slot) in one CTA
  // of 512 threads, 1 MiB pieces, measured by gpu/nvls_bench (2026-11-27): 44.2 GB/s on an
  // H100 within its memory; on an H200 43.4 within, 41.5 to a peer. Charged to each NVLS step
  // a CTA moves (scatter, gather, and its share of a reduce: a multimem.ld_reduce and st per
  // 16 bytes, assumed no faster than a copy's load and store; there is no multicast to measure).
  double cta_copy_bytes_per_ns = 44;
};

}  // namespace doorbell::models
