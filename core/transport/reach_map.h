// Transport selection (SPEC §2): every transport answers, per peer, whether it can reach it
// and with which capabilities; each PE's answers form a bitmap of reachable transports per
// peer, all-gathered into an npes x npes map. For each peer the first transport (in the
// order they were registered) that supports RMA carries RMA, the first that supports
// atomics carries AMOs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace doorbell::transport {

enum Cap : uint32_t { kRead = 1u << 0, kWrite = 1u << 1, kAtomics = 1u << 2 };

struct Transport {
  std::string name;
  // Capabilities from `pe` to `peer`, 0 when it cannot reach it.
  virtual uint32_t can_reach(uint32_t pe, uint32_t peer) const = 0;
  virtual ~Transport() = default;
};

class ReachMap {
 public:
  // Query every transport from every PE (each PE fills its row; rows are then shared, as an
  // allgather over the bootstrap network would).
  static Result<ReachMap> build(uint32_t npes, const std::vector<const Transport*>& transports);

  uint32_t npes() const { return npes_; }
  // Bitmap of transports (bit t = transports[t]) that reach `peer` from `pe`.
  uint32_t reachable(uint32_t pe, uint32_t peer) const { return bits_[pe * npes_ + peer]; }
  // Index of the transport for RMA / AMO from pe to peer, or -1 if none can.
  int rma(uint32_t pe, uint32_t peer) const { return rma_[pe * npes_ + peer]; }
  int amo(uint32_t pe, uint32_t peer) const { return amo_[pe * npes_ + peer]; }
  const std::string& name(int t) const { return names_[size_t(t)]; }

 private:
  uint32_t npes_ = 0;
  std::vector<uint32_t> bits_;
  std::vector<int> rma_, amo_;
  std::vector<std::string> names_;
};

}  // namespace doorbell::transport
