#include "core/transport/reach_map.h"

namespace doorbell::transport {

Result<ReachMap> ReachMap::build(uint32_t npes, const std::vector<const Transport*>& transports) {
  if (transports.size() > 32) return Status(Errc::kBadParam, "reach map: at most 32 transports");
  ReachMap m;
  m.npes_ = npes;
  m.bits_.assign(size_t(npes) * npes, 0);
  m.rma_.assign(size_t(npes) * npes, -1);
  m.amo_.assign(size_t(npes) * npes, -1);
  for (const Transport* t : transports) m.names_.push_back(t->name);
  for (uint32_t pe = 0; pe < npes; ++pe)
    for (uint32_t peer = 0; peer < npes; ++peer)
      for (size_t t = 0; t < transports.size(); ++t) {
        const uint32_t caps = transports[t]->can_reach(pe, peer);
        if (caps == 0) continue;
        const size_t i = size_t(pe) * npes + peer;
        m.bits_[i] |= 1u << t;
        if (m.rma_[i] < 0 && (caps & (kRead | kWrite)) == (kRead | kWrite)) m.rma_[i] = int(t);
        if (m.amo_[i] < 0 && (caps & kAtomics)) m.amo_[i] = int(t);
      }
  return m;
}

}  // namespace doorbell::transport
