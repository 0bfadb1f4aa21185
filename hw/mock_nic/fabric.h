// An in-process fabric joining NIC model instances: RC packets of a QP go to the NIC whose
// port LID the QP was connected to. A NIC not attached to a fabric reaches only itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "hw/mock_nic/link.h"

namespace doorbell::mock_nic {

class Nic;

// A NIC of another process: its LID is reached over the link to that process.
struct RemotePeer {
  ShmLinks* links = nullptr;
  uint32_t process = 0;
};

class Fabric {
 public:
  // Attach a NIC; its LID must be unique on the fabric.
  Status attach(Nic& nic);
  Nic* by_lid(uint16_t lid) const { return lid < by_lid_.size() ? by_lid_[lid] : nullptr; }
  // The registry of NICs in other processes (cross-process fabric, link.h): LID -> process.
  Status attach_remote(uint16_t lid, ShmLinks* links, uint32_t process);
  const RemotePeer* remote(uint16_t lid) const { return lid < remote_.size() && remote_[lid].links != nullptr ? &remote_[lid] : nullptr; }
  Nic* by_gid(const uint8_t gid[16]) const;
  // Answer a request that came over the link from another process: the NIC of this process
  // the request names by LID runs its responder half. A LID no NIC here owns is a packet
  // nobody takes: the requester sees it unanswered (and retries, as for a silent peer).
  void serve(const uint8_t* request, size_t len, ShmLinks::Reply& reply) const;
  // The fabric's step clock: the furthest engine time of its NICs, in nanoseconds.
  double now_ns() const;
  // One progress round over every NIC; returns the actions performed.
  size_t progress(size_t budget_per_nic = ~size_t{0});
  // Progress until no NIC can act; returns false if `max_rounds` was reached first.
  bool run_until_idle(size_t max_rounds = 1u << 20);

 private:
  std::vector<Nic*> nics_;
  std::vector<Nic*> by_lid_;  // indexed by LID: the engine looks a peer up for every WQE
  std::vector<RemotePeer> remote_;  // indexed by LID
};

}  // namespace doorbell::mock_nic
