// Transport selection: per-peer bitmaps, first RMA-capable and first AMO-capable transport.
#include "core/transport/reach_map.h"

#include <gtest/gtest.h>

namespace doorbell::transport {
namespace {

struct P2p : Transport {  // NVLink peers on the same node: loads/stores, no remote atomics here
  uint32_t per_node;
  explicit P2p(uint32_t n) : per_node(n) { name = "p2p"; }
  uint32_t can_reach(uint32_t pe, uint32_t peer) const override {
    return pe / per_node == peer / per_node ? kRead | kWrite : 0;
  }
};
struct Ibgda : Transport {  // every peer through the NIC, with atomics
  uint32_t down;            // a PE whose NIC is unusable
  explicit Ibgda(uint32_t d) : down(d) { name = "ibgda"; }
  uint32_t can_reach(uint32_t pe, uint32_t peer) const override {
    return pe == down || peer == down ? 0 : kRead | kWrite | kAtomics;
  }
};

TEST(ReachMap, FirstCapableTransportPerPeer) {
  P2p p2p(2);
  Ibgda ib(3);
  auto m = ReachMap::build(4, {&p2p, &ib});
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->reachable(0, 1), 0b11u);  // same node: both
  EXPECT_EQ(m->reachable(0, 2), 0b10u);  // other node: NIC only
  EXPECT_EQ(m->name(m->rma(0, 1)), "p2p");
  EXPECT_EQ(m->name(m->amo(0, 1)), "ibgda");  // p2p has no atomics: the NIC carries AMOs
  EXPECT_EQ(m->name(m->rma(0, 2)), "ibgda");
  EXPECT_EQ(m->rma(0, 3), -1);  // PE 3's NIC is down and it is on another node
  EXPECT_EQ(m->name(m->rma(2, 3)), "p2p");
  EXPECT_EQ(m->amo(2, 3), -1);
}

}  // namespace
}  // namespace doorbell::transport
