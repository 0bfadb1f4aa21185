// State of one RC queue pair in the NIC model: its send ring in modelled memory, doorbell
// record, connection, and the engine's view (consumer index, WQEs issued but not yet
// retired, in order). Plain data; behaviour lives in engine.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "hw/mlx5/cqe.h"
#include "hw/mock_nic/types.h"

namespace doorbell::mock_nic {

struct QpAttr {
  uint32_t pd = 0;
  uint32_t send_cqn = 0;
  uint32_t recv_cqn = 0;      // with srqn; 0: no receive queue (WRITE_IMM to this QP then gets RNR NAKs)
  uint32_t log_sq_size = 6;   // WQEBBs in the send ring, 2^log (at most 2^15)
  uint64_t sq_va = 0;         // 2^log_sq_size * 64 bytes
  uint64_t dbr_va = 0;        // QpDoorbellRecord
  uint32_t uar_page = 0;      // doorbells for this QP must come through this UAR page
  uint32_t srqn = 0;          // receives come from this SRQ (as IBGDA hosts set up; no per-QP RQ is modelled)
  uint32_t max_ds = 63;       // largest WQE accepted, in octowords
  // DC: a DC initiator (DCI) names its target in each WQE's address vector (DCT by LID and
  // number, with the DC key); a DC target (DCT) has no send queue, takes requests from any
  // DCI whose key is its own, and lives in the QPN space.
  bool dc = false;
  bool dct = false;
  uint64_t dc_key = 0;        // a DCT's access key
};

// A DC target as CREATE_DCT makes it: active at once, answering every DCI with its key.
struct DctAttr {
  uint32_t pd = 0;
  uint32_t srqn = 0, recv_cqn = 0;  // receives (WRITE_IMM), as an RC QP's
  uint64_t dc_key = 0;
  uint32_t remote_access = 0;       // kRemoteWrite | kRemoteRead | kRemoteAtomic
  uint8_t atomic_mode = 3;
};

// Where an RC QP's packets go: the peer port's LID and the peer QPN.
struct QpPeer {
  uint16_t lid = 0;
  uint32_t qpn = 0;
};

// A WQE issued to the wire whose completion is not yet retired.
struct Inflight {
  uint64_t wqe_idx = 0;        // 64-bit index of its first WQEBB
  uint8_t wqe_opcode = 0;
  bool signaled = false;
  bool landed = true;          // false while a READ/atomic response is on its way
  uint64_t due = 0;            // engine time at which the response lands
  uint32_t byte_cnt = 0;
  uint8_t syndrome = 0;        // non-zero: this WQE failed
  uint8_t vendor = 0;
  std::vector<std::byte> data; // response payload (READ data, atomic old value)
  struct Scatter {
    uint32_t lkey;
    uint64_t addr;
    uint32_t len;
  };
  std::vector<Scatter> scatter;  // where the payload lands
  bool phantom = false;          // phantom memory on either side: nothing to land
  bool placed = false;           // READ data already in its scatter list (placed from the link at issue)
  uint16_t dc_lid = 0;           // a DCI's WQE: the LID of the DCT that answers it
  // A WRITE to another process sent without waiting (NicConfig::async_link_writes): its
  // segments' link requests [link_seq, link_seq + link_n), link_got of their answers taken.
  uint64_t link_seq = 0;
  uint32_t link_n = 0, link_got = 0;
  bool link_unanswered = false;  // one answer said the responder did not answer (resend)
};

// A shared receive queue: receive WQEs counted, consumed by WRITE_IMM (and SEND, later).
struct Srq {
  uint32_t srqn = 0;
  uint32_t pd = 0;
  uint32_t max_wr = 0;
  uint64_t posted = 0, consumed = 0;
};

struct QpStats {
  uint64_t doorbells = 0, dropped_doorbells = 0;
  uint64_t wqes = 0, wqebbs = 0, bytes = 0;
  uint64_t errors = 0, flushed = 0;
};

struct Qp {
  uint32_t qpn = 0;
  QpAttr attr;
  QpState state = QpState::kRst;
  QpPeer peer;
  uint32_t remote_access = kRemoteWrite | kRemoteRead | kRemoteAtomic;  // what peers may do here
  uint8_t atomic_mode = 3;   // responder: extended (masked) atomics need 3 (8 bytes) or more
  // Responder: the requester's WQE index after the last request from the peer it executed
  // since RESET (beside the fields a request reads). The model reports it as next_rcv_psn
  // (its PSNs are the requester's WQE indices); recovery learns from it what was applied.
  uint64_t rcv_upto = 0;
  bool key_violation_raised = false;  // a DCT: DCT_KEY_VIOLATION raised (once)
  QpTimers timers;

  std::byte* sq = nullptr;                // pinned translation of attr.sq_va
  mlx5::QpDoorbellRecord* dbr = nullptr;  // pinned translation of attr.dbr_va
  uint64_t sq_mask = 0;                   // WQEBBs - 1

  uint64_t head = 0;      // next WQEBB the engine fetches
  uint64_t prod = 0;      // producer index last read from the DBR (64-bit)
  bool kicked = false;    // a doorbell arrived that the engine has not acted on
  bool active = false;    // on the NIC's active list
  bool error_pending = false;  // a failed WQE waits in `inflight` to be retired
  uint32_t pending_responses = 0;
  uint32_t async_writes = 0;  // in `inflight` with link requests awaiting answers
  std::deque<Inflight> inflight;
  Inflight staging;       // response record of the WQE being issued (reused, no allocation)
  uint64_t last_doorbell = 0;
  uint16_t audit_dbr = 0;  // NicConfig::audit: the doorbell record at the previous doorbell
  // Requester: the head WQE (or an unanswered response) waits for the peer until this time
  // (negative: not waiting; infinity: RNR with rnr_retry 7).
  double retry_deadline_ns = -1;
  bool rnr_wait = false;

  QpStats stats;
};

}  // namespace doorbell::mock_nic
