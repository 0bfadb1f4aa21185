#include "hw/mock_nic/devx/syndromes.h"

#include "hw/mlx5/prm/layouts.h"

namespace doorbell::mock_nic {

namespace {
using S = DevxSyndrome;
constexpr DevxSyndromeInfo kTable[] = {
    {S::kNone, prm::kStatOk, "ok"},
    {S::kUnknownOpcode, prm::kStatBadOp, "opcode not implemented"},
    {S::kInputTooShort, prm::kStatBadInputLen, "command input shorter than its layout"},
    {S::kOutputTooShort, prm::kStatBadOutputLen, "reply buffer shorter than its layout"},
    {S::kWrongObject, prm::kStatBadParam, "command does not apply to this object"},
    {S::kUnknownUmem, prm::kStatBadParam, "umem id not registered in this context"},
    {S::kUmemRange, prm::kStatBadParam, "offset + size exceeds the umem"},
    {S::kUmemNotValid, prm::kStatBadParam, "umem_valid is 0 (physical address lists not supported)"},
    {S::kMisaligned, prm::kStatBadParam, "buffer or doorbell record misaligned"},
    {S::kUnknownPd, prm::kStatBadRes, "PD not allocated in this context"},
    {S::kUnknownUar, prm::kStatBadRes, "UAR page not allocated in this context"},
    {S::kUnknownCq, prm::kStatBadRes, "CQ does not exist"},
    {S::kCqOtherContext, prm::kStatBadRes, "CQ belongs to another context"},
    {S::kUnknownSrq, prm::kStatBadRes, "SRQ not created in this context"},
    {S::kUnknownQp, prm::kStatBadRes, "QP not created in this context"},
    {S::kQpnMismatch, prm::kStatBadParam, "qpn field does not name the object"},
    {S::kBadCqSize, prm::kStatBadParam, "log_cq_size out of range"},
    {S::kCqeSizeUnsupported, prm::kStatBadParam, "only 64-byte CQEs are modelled"},
    {S::kBadSqSize, prm::kStatBadParam, "log_sq_size out of range or no_sq set"},
    {S::kQpTypeUnsupported, prm::kStatBadParam, "only RC QPs are modelled"},
    {S::kRqTypeUnsupported, prm::kStatBadParam, "only SRQ or zero-size receive queues are modelled"},
    {S::kBadMtu, prm::kStatBadParam, "MTU enum out of 1..5"},
    {S::kBadPort, prm::kStatBadParam, "port number out of range"},
    {S::kIllegalTransition, prm::kStatBadResState, "QP state transition not allowed from the current state"},
    {S::kCqInUse, prm::kStatBadResState, "CQ still used by a QP"},
    {S::kModelRefused, prm::kStatBadParam, "the device model refused the object"},
};
}  // namespace

const DevxSyndromeInfo& devx_syndrome_info(DevxSyndrome s) {
  for (const auto& e : kTable)
    if (e.syndrome == s) return e;
  return kTable[0];
}

const char* devx_syndrome_text(uint32_t syndrome) {
  for (const auto& e : kTable)
    if (uint32_t(e.syndrome) == syndrome && syndrome != 0) return e.what;
  return nullptr;
}

}  // namespace doorbell::mock_nic
