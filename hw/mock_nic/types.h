// Shared vocabulary of the software mlx5 NIC model: object states, access rights, the
// model's configuration and its vendor-syndrome codes (the mlx5 syndrome says what class of
// error; the vendor byte says precisely which check failed, for diagnosis).
#pragma once

#include <cstdint>

namespace doorbell::mock_nic {

enum class QpState : uint8_t { kRst, kInit, kRtr, kRts, kErr };
const char* qp_state_name(QpState s);

// Memory-region access rights (values as ibv_access_flags).
enum Access : uint32_t {
  kLocalWrite = 1u << 0,
  kRemoteWrite = 1u << 1,
  kRemoteRead = 1u << 2,
  kRemoteAtomic = 1u << 3,
};

// Why a key check failed (the low nibble of the vendor syndrome for key errors).
enum class KeyFault : uint8_t { kNone = 0, kBadKey = 1, kWrongPd = 2, kNoAccess = 3, kOutOfRange = 4 };

// Model-specific vendor syndromes written to err CQE byte 54.
namespace vendor {
inline constexpr uint8_t kBadOpcode = 0x01;
inline constexpr uint8_t kBadDs = 0x02;
inline constexpr uint8_t kQpnMismatch = 0x03;
inline constexpr uint8_t kWqeIndexMismatch = 0x04;
inline constexpr uint8_t kBadSegment = 0x05;
inline constexpr uint8_t kLengthTooLarge = 0x06;
inline constexpr uint8_t kLocalKeyBase = 0x10;   // + KeyFault
inline constexpr uint8_t kRemoteKeyBase = 0x18;  // + KeyFault
inline constexpr uint8_t kAtomicMisaligned = 0x20;
inline constexpr uint8_t kAtomicBadLength = 0x21;
inline constexpr uint8_t kRemoteNotReady = 0x30;
inline constexpr uint8_t kRnr = 0x31;
inline constexpr uint8_t kQpAccess = 0x32;  // the responder QP does not allow this operation
inline constexpr uint8_t kPhantomAtomic = 0x33;  // an atomic needs real bytes, not phantom memory
inline constexpr uint8_t kForcedError = 0x40;
inline constexpr uint8_t kFlushed = 0x41;
inline constexpr uint8_t kRetryTimeout = 0x42;   // no answer within retry_count * ack_timeout
inline constexpr uint8_t kRnrTimeout = 0x43;     // RNR NAKs beyond rnr_retry
inline constexpr uint8_t kCqOverrun = 0x44;      // the QP's CQ overran: the QP is fatal
inline constexpr uint8_t kExtAtomicMode = 0x34;  // extended atomic, responder atomic_mode < 3
inline constexpr uint8_t kDcNotModelled = 0x35;  // a DCI's WQE to a DCT in another process: DC crosses no process link
}  // namespace vendor

// RC timers of a QP (PRM qpc fields; set at INIT2RTR / RTR2RTS). A requester whose packets
// get no answer retransmits every 4.096 us * 2^ack_timeout and fails with RETRY_EXC after
// retry_count tries; a responder without a receive answers RNR NAK, the requester waits the
// responder's min_rnr_nak time and retries rnr_retry times (7: forever).
struct QpTimers {
  uint8_t ack_timeout = 14;  // what the driver sets (about 67 ms)
  uint8_t retry_count = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_nak = 12;  // responder side: 0.64 ms
};
double ack_timeout_ns(uint8_t ack_timeout);  // 4.096 us * 2^t (0: no timeout at all, as in IB: infinity)
double rnr_nak_ns(uint8_t code);             // the IB spec's RNR NAK timer table

// An asynchronous event, as a ConnectX raises on its event queue.
struct AsyncEvent {
  enum Kind : uint8_t {
    kQpFatal,           // local work queue catastrophic error
    kQpAccessError,     // the responder met an access violation (remote access error)
    kQpRequestError,    // the responder met an invalid request
    kCqError,           // CQ overrun: a CQE was dropped
    kDctKeyViolation,   // a DCT dropped a request whose DC key was not its own (object: the DCT)
  } kind = kQpFatal;
  uint32_t object = 0;  // qpn or cqn
  uint8_t syndrome = 0;
};
const char* async_event_name(AsyncEvent::Kind k);

// The NIC's own record of a WQE that failed (not a flush): the root cause an overwritten
// collapsed CQ cannot keep.
struct ErrorRecord {
  uint32_t qpn = 0;
  uint64_t wqe_idx = 0;
  uint8_t wqe_opcode = 0;
  uint8_t syndrome = 0;
  uint8_t vendor = 0;
  double when_ns = 0;
};

struct NicConfig {
  uint16_t lid = 1;                 // port LID: how a fabric addresses this NIC
  // READ / atomic responses land 0..response_delay_max engine actions after issue (drawn
  // from `seed`), in order; 0 lands them at once. Exposes missing fences.
  uint32_t response_delay_max = 0;
  uint64_t seed = 1;
  bool check_wqe_index = true;      // ctrl-segment WQE index must equal the consumer's
  // The harness's checks on a client's queues at each doorbell (audit.cc): every WQE below
  // the new doorbell record whole, the record never moving back, the BlueFlame index within
  // it, nothing posted to a QP in ERR; and CQ overruns. Each finding is a line in audit().
  bool audit = false;
  // After a doorbell, the engine re-reads the send DBR whenever it drains the ring, so DBR
  // advances made while it is active are picked up without a new doorbell (as hardware
  // keeps fetching while the SQ is scheduled).
  bool reread_dbr_when_drained = true;
  // Without a clock (set_clock), timers run on engine actions of this many nanoseconds: a
  // step budget with the same proportions as simulated time.
  double action_ns = 100;
  // Runs of plain RDMA WRITEs go through qp_step with a ring and port that check per run what
  // cannot change inside it (Engine::issue_writes); off, each goes through the full issue(). The two give
  // the same results (tests/mock_nic/batch_writes_test.cc compares them).
  bool batch_writes = true;
  // RDMA WRITEs to a responder in another process go out without waiting for their answers
  // (ShmLinks::send); each stays in flight until its answer is polled, in order. A WRITE not
  // answered sends it and everything after it again; READs and atomics wait until no WRITE is
  // in flight. Off, every request waits for its answer (ShmLinks::call).
  bool async_link_writes = false;
};

}  // namespace doorbell::mock_nic
