// The one NIC model a process sees through the verbs / mlx5dv shim (libibverbs.so.1 and
// libmlx5.so.1 built from this directory): an mlx5 device "mlx5_0" whose port has LID
// rank + 1, backed by hw/mock_nic's engine, which a thread of the shim runs. Doorbells: the
// UAR pages the shim hands out are plain memory (a program cannot reach MMIO here), so the
// engine thread watches their BlueFlame words and rings the model when one changes — as a
// ConnectX takes the doorbell a CPU proxy writes. With several processes
// (DOORBELL_SHIM_RANK / DOORBELL_SHIM_NRANKS / DOORBELL_SHIM_LINKS), packets for another
// process's LID cross the shared-memory links (hw/mock_nic/link.h). Registered memory is the
// program's own, mapped into the model's address space by identity; device memory is moved
// through the CUDA Dma where the shim was built with CUDA.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "host/verbs_shim/faults.h"
#include "host/verbs_shim/timeline.h"
#include "hw/mem/address_space.h"
#include "hw/mock_nic/devx/model_devx.h"
#include "hw/mock_nic/fabric.h"
#include "hw/mock_nic/link.h"
#include "hw/mock_nic/nic.h"

namespace doorbell::shim {

// What the shim counts; printed at exit (DOORBELL_SHIM_QUIET=1 silences it).
struct Stats {
  uint64_t doorbells = 0;  // BlueFlame words that changed
  uint64_t actions = 0;    // engine actions (WQEs executed, responses landed, CQEs written)
  uint64_t wqes = 0;       // WQEs the model executed, over every QP it ever had
  uint64_t remote_calls = 0, remote_served = 0;
};

class Model {
 public:
  // The process's model, made on first use from the environment; null (and *why) if the
  // environment is wrong.
  static Model* get(std::string* why = nullptr);

  std::mutex mu;  // the control path and the engine thread take turns on the model
  mock_nic::Nic& nic() { return *nic_; }
  mem::AddressSpace& memory() { return mem_; }
  uint32_t rank() const { return rank_; }

  // Program memory the model may reach: [addr, addr + len) mapped by identity unless a
  // mapping already covers it; released when its last user goes.
  Status map(void* addr, uint64_t len);
  void unmap(void* addr);

  // A UAR page of real memory: its BlueFlame words are watched by the engine thread.
  struct UarPage {
    uint32_t page = 0;      // the model's page id
    uint8_t* mem = nullptr; // 4 KiB; BlueFlame register at mlx5::kBfOffset
    uint64_t seen[2] = {};  // the last value of each BlueFlame buffer
  };
  UarPage* add_uar(uint32_t page);
  void remove_uar(UarPage* u);
  void count_qp(uint32_t qpn);  // a QP the program made (DEVX CREATE_QP)
  void count_cq(uint32_t cqn);  // a CQ the program made
  void retire_qp(uint32_t qpn);  // before it is destroyed: its WQEs stay counted

  Stats stats();  // takes mu
  // Where the time went since the start, or since the last profile(true): one line per part
  // (the client's proxy, the doorbell watch, the engine, the link, the device copies). Takes mu.
  std::string profile(bool restart = false);
  size_t report_checks();  // the queue checks' new findings to stderr; how many fired in all
  void report_hang(const char* why);  // the queues, counters and links to stderr (mu held)
  void stop();    // the engine thread ends (at exit); the model stays
  bool has_dma() const { return dma_ != nullptr; }

 private:
  Model() = default;
  Status start(std::string* why);
  void run();  // the engine thread
  bool ring_changed(uint64_t now_ns);
  bool work_outstanding() const;
  ~Model() = default;  // only a model that failed to start is destroyed (see get())

  mem::AddressSpace mem_;
  std::unique_ptr<mock_nic::Nic> nic_;
  mock_nic::Fabric fabric_;
  std::unique_ptr<mock_nic::ShmLinks> links_;
  std::unique_ptr<mock_nic::Dma> dma_;
  uint32_t rank_ = 0, nranks_ = 1;
  struct Mapping {
    uint64_t len;
    uint32_t users;
  };
  std::map<uint64_t, Mapping> maps_;  // by start
  std::vector<std::unique_ptr<UarPage>> uars_;
  std::vector<uint32_t> qpns_;
  uint64_t doorbells_ = 0, actions_ = 0, retired_wqes_ = 0;
  ShimFaults faults_;   // DOORBELL_SHIM_FAULTS
  uint32_t qps_made_ = 0;
  double hang_ns_ = 0;  // DOORBELL_SHIM_HANG_S
  std::unique_ptr<Timeline> timeline_;  // DOORBELL_SHIM_TRACE=file.json
  size_t reported_checks_ = 0;
  // The profile's clocks (steady ns): a QP's doorbell record seen moving before its
  // BlueFlame store (the client's proxy between the two), the engine's looks, its progress.
  struct DbrWatch {
    uint16_t dbr = 0;
    bool moved = false;
    uint64_t since_ns = 0;
  };
  std::vector<DbrWatch> dbr_watch_;  // beside qpns_
  uint64_t proxy_ns_ = 0, proxy_n_ = 0;
  uint64_t last_look_ns_ = 0, look_gap_ns_ = 0, sleeps_ = 0;
  uint64_t progress_ns_ = 0;
  struct Tallies {
    uint64_t proxy_ns = 0, proxy_n = 0, watch_ns = 0, doorbells = 0, sleeps = 0, progress_ns = 0, wqes = 0;
    uint64_t calls = 0, call_ns = 0, served = 0, serve_ns = 0;
    std::vector<mock_nic::Dma::Tally> copies;
  };
  Tallies tallies();  // mu held
  Tallies since_;     // the profile's start
  bool restarted_ = false;
  Stats stats_locked();
  std::atomic<bool> stop_{false};
  std::thread engine_;
};

// Device memory moved with cuMemcpyAsync on a non-blocking stream of device `ordinal`'s
// primary context, through the CUDA plugin beside the shim (null and *why when there is none).
std::unique_ptr<mock_nic::Dma> make_cuda_dma(int ordinal, std::string* why);

}  // namespace doorbell::shim
