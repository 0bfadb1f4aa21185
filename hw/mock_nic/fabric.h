// An in-process fabric joining NIC model instances: RC packets of a QP go to the NIC whose
// port LID the QP was connected to. A NIC not attached to a fabric reaches only itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace doorbell::mock_nic {

class Nic;

class Fabric {
 public:
  // Attach a NIC; its LID must be unique on the fabric.
  Status attach(Nic& nic);
  Nic* by_lid(uint16_t lid) const { return lid < by_lid_.size() ? by_lid_[lid] : nullptr; }
  Nic* by_gid(const uint8_t gid[16]) const;
  // The fabric's step clock: the furthest engine time of its NICs, in nanoseconds.
  double now_ns() const;
  // One progress round over every NIC; returns the actions performed.
  size_t progress(size_t budget_per_nic = ~size_t{0});
  // Progress until no NIC can act; returns false if `max_rounds` was reached first.
  bool run_until_idle(size_t max_rounds = 1u << 20);

 private:
  std::vector<Nic*> nics_;
  std::vector<Nic*> by_lid_;  // indexed by LID: the engine looks a peer up for every WQE
};

}  // namespace doorbell::mock_nic
