// OB1's large-message path over the smcuda BTL once CUDA IPC is set up (seed 001, SPEC §6).
// Every GPU-buffer send first gives the lazy set-up (ipc_setup.h) its chance to ask the peer.
// The large-message RDMA flag (bml->btl_flags) is set on each side when IPC is agreed: on the
// side that answers ACK when it sends it, on the asking side when the ACK arrives. With the
// flag set, a send larger than the eager limit goes as an RGET: the sender ships the IPC handle
// of its buffer (cuIpcGetMemHandle, base, size, buffer id) and waits; the receiver maps it
// through its cache of remote regions (ipc_cache.h: cuIpcOpenMemHandle costs ~90 µs, so a
// mapping is kept), pulls the bytes with cudaMemcpyAsync on its stream, records an event, and
// answers FIN once that event completed; the FIN completes the send, after which the sender
// may reuse or free the buffer. Without the flag (set-up not done, NOT-READY, no peer access:
// BAD) and for small sends, the bytes go through host memory (copy in, copy out) and the send
// completes at once. One source for the model and CUDA: the endpoint reaches memory and the
// GPU only through its host `H`:
//   IpcHandle handle(uint64_t va)                       cuIpcGetMemHandle of this side's buffer
//   std::vector<uint8_t> copy_in(uint64_t va, uint64_t n)   the host path, sender's side
//   void copy_out(uint32_t seq, const std::vector<uint8_t>&) the host path, receiver's side
//   bool pull(uint32_t seq, const IpcHandle&, uint64_t va, uint64_t n)
//        map (through the cache) and cudaMemcpyAsync + event; false: the mapping failed
//   bool pulled(uint32_t seq)                           that pull's event completed
//   void completed(uint32_t seq)                        a FIN arrived: the send is complete
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "base/cuda_ipc.h"
#include "core/p2p/ipc_setup.h"

namespace doorbell::p2p::smcuda {

enum class Kind : uint8_t { kControl, kEager, kRget, kFin };

// A message on the BTL's shared-memory FIFO (reliable, in order, one per direction).
struct Msg {
  Kind kind = Kind::kControl;
  IpcMsg control = IpcMsg::kNone;  // kControl: the set-up's message
  uint32_t seq = 0;                // the send it belongs to
  uint64_t bytes = 0;
  IpcHandle handle;                // kRget: the sender's allocation
  uint64_t va = 0;                 // kRget: the bytes' address in the sender's space
  std::vector<uint8_t> payload;    // kEager: the bytes, through host memory
};

// Planted bugs, for tests only.
struct Plants {
  bool flag_on_request = false;       // the asking side sets the RDMA flag when it asks, not on the ACK
  bool fin_before_copy_done = false;  // the receiver answers FIN once the pull is posted, not completed
};

struct Options {
  uint64_t eager_bytes = 4096;  // sends up to this size always take the host path
  Plants plants;
};

struct Endpoint {
  IpcEndpoint ipc;
  bool rdma = false;        // the large-message RDMA flag
  std::deque<uint32_t> pulls;  // RGETs this side is pulling, oldest first
  uint64_t rgets = 0, eagers = 0, failed_pulls = 0;

  // Starts send `seq` of `n` bytes at `va` (this side's GPU); what goes on the wire is
  // appended to `out`. True when the send is already complete (the host path).
  template <class H>
  bool send(H& h, uint32_t seq, uint64_t va, uint64_t n, std::vector<Msg>& out, const Options& o) {
    if (const IpcMsg m = ipc.on_send(); m != IpcMsg::kNone) {
      out.push_back({Kind::kControl, m});
      if (o.plants.flag_on_request) rdma = true;
    }
    if (rdma && n > o.eager_bytes) {
      out.push_back({Kind::kRget, IpcMsg::kNone, seq, n, h.handle(va), va});
      ++rgets;
      return false;
    }
    Msg e{Kind::kEager, IpcMsg::kNone, seq, n};
    e.payload = h.copy_in(va, n);
    out.push_back(std::move(e));
    ++eagers;
    return true;
  }

  // A message from the peer. `peer_access` is cuDeviceCanAccessPeer between the two GPUs.
  template <class H>
  void on_message(H& h, const Msg& m, bool peer_access, std::vector<Msg>& out, const Options& o) {
    switch (m.kind) {
      case Kind::kControl: {
        const IpcMsg answer = ipc.on_message(m.control, peer_access);
        if (answer == IpcMsg::kAck || (m.control == IpcMsg::kAck && ipc.state == IpcState::kOk)) rdma = true;
        if (answer != IpcMsg::kNone) out.push_back({Kind::kControl, answer});
        break;
      }
      case Kind::kEager: h.copy_out(m.seq, m.payload); break;
      case Kind::kRget:
        if (!h.pull(m.seq, m.handle, m.va, m.bytes)) {
          ++failed_pulls;  // the host reports why; the send is never completed
          break;
        }
        if (o.plants.fin_before_copy_done) out.push_back({Kind::kFin, IpcMsg::kNone, m.seq});
        else pulls.push_back(m.seq);
        break;
      case Kind::kFin: h.completed(m.seq); break;
    }
  }

  // FIN for every pull, oldest first, whose copy completed. Returns whether any went out.
  template <class H>
  bool progress(H& h, std::vector<Msg>& out) {
    bool did = false;
    while (!pulls.empty() && h.pulled(pulls.front())) {
      out.push_back({Kind::kFin, IpcMsg::kNone, pulls.front()});
      pulls.pop_front();
      did = true;
    }
    return did;
  }
};

}  // namespace doorbell::p2p::smcuda
