// The fault vocabulary a NIC model can be given, one name each, shared by scenarios
// (sim/ibgda/faults.h's WorldFault) and the verbs shim's DOORBELL_SHIM_FAULTS.
#pragma once

#include <cstdint>
#include <string_view>

namespace doorbell::mock_nic {

enum FaultKind : uint8_t {
  kQpError,        // a QP goes to ERR at a time
  kLinkDown,       // the port is down for a while
  kStall,          // the NIC engine does nothing for a while (or for good)
  kLostDoorbells,  // the next `count` doorbells are lost
  kLateDoorbells,  // doorbells act `count` engine actions late
  kLateCqes,       // send CQEs appear `count` engine actions late
  kStaleRkey,      // the keys a peer holds for memory are stale
  kStaleDcKey,     // the DC key a peer holds for a DCT is stale
  kNodeDeath,      // the node dies: nothing answers any more
  kLateResponses,  // READ / atomic responses land up to `count` engine actions late, seeded
};
inline constexpr uint32_t kFaultKinds = kLateResponses + 1;

constexpr const char* fault_kind_name(FaultKind k) {
  switch (k) {
    case kQpError: return "qp_error";
    case kLinkDown: return "link_down";
    case kStall: return "stall_nic";
    case kLostDoorbells: return "drop_doorbells";
    case kLateDoorbells: return "doorbell_delay";
    case kLateCqes: return "late_cqes";
    case kStaleRkey: return "stale_rkey";
    case kStaleDcKey: return "stale_dc_key";
    case kNodeDeath: return "node_death";
    case kLateResponses: return "late_responses";
  }
  return "?";
}

// The kind named `name`; false if none is.
inline bool fault_kind_of(std::string_view name, FaultKind* out) {
  for (uint32_t k = 0; k < kFaultKinds; ++k)
    if (name == fault_kind_name(FaultKind(k))) return *out = FaultKind(k), true;
  return false;
}

}  // namespace doorbell::mock_nic
