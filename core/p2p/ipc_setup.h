// Lazy CUDA IPC set-up between two endpoints, as smcuda does it (SPEC §6, seed 001): nothing
// at init; the first GPU-buffer send of either side asks the peer (its device id), the peer
// checks peer access and answers ACK or NACK — or NOT-READY while its CUDA is not up, which
// sends the asker back to INIT to retry on a later send, at most 5 times. States per side:
// INIT, SENT (asked), ACKING (checking a request), ACKED (answered yes: may use IPC), OK (got
// the yes), BAD (no IPC: sends take the host path). Messages may cross, arrive late or be
// lost; a side uses IPC only in ACKED or OK.
#pragma once

#include <cstdint>

namespace doorbell::p2p {

enum class IpcState : uint8_t { kInit, kSent, kAcking, kAcked, kOk, kBad };
const char* ipc_state_name(IpcState s);

enum class IpcMsg : uint8_t { kNone, kRequest, kAck, kNack, kNotReady };

inline constexpr uint32_t kIpcMaxTries = 5;
// Sends that may go by in SENT before the request counts as lost and is asked again (a lost
// request or answer would otherwise leave the side in SENT for good).
inline constexpr uint32_t kIpcResendAfter = 16;

// Planted bugs, for tests only.
struct IpcPlants {
  bool ack_without_peer_check = false;  // answer ACK without asking whether peer access works
  bool retry_forever = false;           // no limit on NOT-READY retries
  bool not_ready_resets_tries = false;  // a NOT-READY answer starts the count of tries again
  bool resend_uncounted = false;        // a request asked again after it was presumed lost is not counted
};

struct IpcEndpoint {
  IpcState state = IpcState::kInit;
  uint32_t tries = 0;      // requests sent
  uint32_t waited = 0;     // sends since the last request, while in SENT
  bool cuda_ready = true;  // this side's CUDA is initialised (a request before it gets NOT-READY)
  IpcPlants plants;

  // May a send use IPC now?
  bool ipc_usable() const { return state == IpcState::kAcked || state == IpcState::kOk; }

  // A GPU-buffer send on this side: returns the control message to send first, if any.
  IpcMsg on_send() {
    bool resend = false;
    if (state == IpcState::kSent && ++waited > kIpcResendAfter) state = IpcState::kInit, resend = true;  // presumed lost
    if (state != IpcState::kInit || !cuda_ready) return IpcMsg::kNone;
    waited = 0;
    if (tries >= kIpcMaxTries && !plants.retry_forever) {
      state = IpcState::kBad;  // gave up: the host path from now on
      return IpcMsg::kNone;
    }
    if (!(resend && plants.resend_uncounted)) ++tries;
    state = IpcState::kSent;
    return IpcMsg::kRequest;
  }

  // A control message from the peer; returns the answer to send back, if any.
  // `peer_access` is cuDeviceCanAccessPeer between the two GPUs.
  IpcMsg on_message(IpcMsg m, bool peer_access) {
    switch (m) {
      case IpcMsg::kRequest:
        if (!cuda_ready) return IpcMsg::kNotReady;
        if (state == IpcState::kOk || state == IpcState::kAcked) return IpcMsg::kAck;  // a crossed or repeated request
        if (state == IpcState::kBad) return IpcMsg::kNack;
        state = IpcState::kAcking;
        if (peer_access || plants.ack_without_peer_check) {
          state = IpcState::kAcked;
          return IpcMsg::kAck;
        }
        state = IpcState::kBad;
        return IpcMsg::kNack;
      case IpcMsg::kAck:
        if (state == IpcState::kSent || state == IpcState::kAcked) state = IpcState::kOk;
        return IpcMsg::kNone;
      case IpcMsg::kNack:
        state = IpcState::kBad;
        return IpcMsg::kNone;
      case IpcMsg::kNotReady:
        if (state == IpcState::kSent) state = IpcState::kInit;  // try again on a later send
        if (plants.not_ready_resets_tries) tries = 0;
        return IpcMsg::kNone;
      case IpcMsg::kNone: break;
    }
    return IpcMsg::kNone;
  }
};

inline const char* ipc_state_name(IpcState s) {
  switch (s) {
    case IpcState::kInit: return "INIT";
    case IpcState::kSent: return "SENT";
    case IpcState::kAcking: return "ACKING";
    case IpcState::kAcked: return "ACKED";
    case IpcState::kOk: return "OK";
    case IpcState::kBad: return "BAD";
  }
  return "?";
}

}  // namespace doorbell::p2p
