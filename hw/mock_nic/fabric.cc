#include "hw/mock_nic/fabric.h"

#include <algorithm>
#include <cstring>

#include "hw/mock_nic/nic.h"
#include "hw/mock_nic/wire.h"

namespace doorbell::mock_nic {

Status Fabric::attach(Nic& nic) {
  if (by_lid(nic.lid()) != nullptr || remote(nic.lid()) != nullptr) return Status(Errc::kBadParam, "fabric: LID " + std::to_string(nic.lid()) + " already attached");
  if (nic.fabric_ != nullptr) return Status(Errc::kBadState, "fabric: NIC already attached to a fabric");
  nic.fabric_ = this;
  nics_.push_back(&nic);
  if (nic.lid() >= by_lid_.size()) by_lid_.resize(size_t(nic.lid()) + 1, nullptr);
  by_lid_[nic.lid()] = &nic;
  return {};
}

Status Fabric::attach_remote(uint16_t lid, ShmLinks* links, uint32_t process) {
  if (by_lid(lid) != nullptr || remote(lid) != nullptr)
    return Status(Errc::kBadParam, "fabric: LID " + std::to_string(lid) + " already attached");
  if (lid >= remote_.size()) remote_.resize(size_t(lid) + 1);
  remote_[lid] = {links, process};
  return {};
}

Nic* Fabric::by_gid(const uint8_t gid[16]) const {
  for (Nic* n : nics_)
    if (std::equal(gid, gid + 16, n->gid().begin())) return n;
  return nullptr;
}

void Fabric::serve(const uint8_t* request, size_t len, ShmLinks::Reply& reply) const {
  wire::RequestHeader h;
  if (len >= sizeof h) std::memcpy(&h, request, sizeof h);
  if (Nic* n = by_lid(h.dst_lid)) return n->serve_remote(request, len, reply);
  ExecOutcome o;
  o.fault = {mlx5::CqeSyndrome::kTransportRetryExcErr, vendor::kRemoteNotReady};
  if (uint8_t* out = reply.room(sizeof(wire::AnswerHeader))) reply.done(wire::encode_answer(o, 0, out));
}

double Fabric::now_ns() const {
  double t = 0;
  for (const Nic* n : nics_) t = std::max(t, double(n->now()) * n->config().action_ns);
  return t;
}

size_t Fabric::progress(size_t budget_per_nic) {
  size_t n = 0;
  for (Nic* nic : nics_) n += nic->progress(budget_per_nic);
  return n;
}

bool Fabric::run_until_idle(size_t max_rounds) {
  for (size_t i = 0; i < max_rounds; ++i)
    if (progress() == 0) return true;
  return false;
}

}  // namespace doorbell::mock_nic
