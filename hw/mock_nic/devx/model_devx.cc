#include "hw/mock_nic/devx/model_devx.h"

#include <cstdlib>
#include <cstring>

#include "hw/mlx5/prm/hca_caps.h"
#include "hw/mlx5/prm/layouts.h"
#include "hw/mlx5_devx/command_status.h"
#include "hw/mock_nic/fabric.h"

namespace doorbell::mock_nic {

using namespace prm;

namespace {
uint32_t g_next_uid = 1;
constexpr uint64_t round_page(uint64_t v) { return (v + 4095) / 4096 * 4096; }

QpcState to_qpc(QpState s) {
  switch (s) {
    case QpState::kRst: return kQpcRst;
    case QpState::kInit: return kQpcInit;
    case QpState::kRtr: return kQpcRtr;
    case QpState::kRts: return kQpcRts;
    case QpState::kErr: return kQpcErr;
  }
  return kQpcErr;
}

devx::Obj obj(uint32_t id) { return devx::Obj{id, id}; }
}  // namespace

ModelDevx::ModelDevx(Nic& nic, std::string name) : nic_(nic), uid_(g_next_uid++) {
  info_.name = name.empty() ? "model" + std::to_string(nic.lid()) : std::move(name);
  info_.provider = "model";
  info_.devx = true;
  info_.max_qp = 1u << 16;
  info_.max_cq = 1u << 16;
  info_.max_qp_wr = 1u << 15;
  info_.max_mr = 1u << 24;
  info_.atomics = true;
  info_.ports = 1;
}

ModelDevx::~ModelDevx() {
  for (uint32_t q : qps_) (void)nic_.destroy_qp(q);
  for (uint32_t c : cqs_) (void)nic_.destroy_cq(c);
  for (uint32_t k : mrs_) (void)nic_.dereg_mr(k);
  for (auto& [id, u] : umems_) nic_.memory().unpin(u.addr);
  for (auto& [p, b] : allocations_) {
    (void)nic_.memory().free(reinterpret_cast<uint64_t>(p));
    std::free(b.base);
  }
}

Status ModelDevx::reject(void* out, DevxSyndrome s, const std::string& detail) {
  const DevxSyndromeInfo& i = devx_syndrome_info(s);
  DB_SET(mbox_out, out, status, i.status);
  DB_SET(mbox_out, out, syndrome, uint32_t(s));
  last_error_ = std::string(i.what) + (detail.empty() ? "" : ": " + detail);
  return Status(Errc::kBadParam, last_error_);
}

// ---- verbs-level resources ----

Result<devx::PortInfo> ModelDevx::query_port(uint8_t port) {
  if (port != 1) return Status(Errc::kBadParam, "query_port: the model has one port (1)");
  devx::PortInfo p;
  p.port = 1;
  p.up = true;
  p.lid = nic_.lid();
  p.gid = nic_.gid();
  p.active_mtu = 5;
  return p;
}

Result<uint32_t> ModelDevx::alloc_pd() {
  const uint32_t pd = nic_.alloc_pd();
  pds_.insert(pd);
  return pd;
}

Status ModelDevx::dealloc_pd(uint32_t pdn) {
  return pds_.erase(pdn) ? Status() : Status(Errc::kNotFound, "dealloc_pd: unknown PD");
}

Result<devx::Umem> ModelDevx::umem_reg(void* addr, size_t size, uint32_t /*access*/) {
  const auto va = reinterpret_cast<uint64_t>(addr);
  if (size == 0 || nic_.memory().translate(va, size) == nullptr)
    return Status(Errc::kBadParam, "umem_reg: range is not memory the model can reach (allocate it through the model)");
  if (Status st = nic_.memory().pin(va); !st) return st;
  const uint32_t id = next_umem_++;
  umems_[id] = {va, size};
  return devx::Umem{id, id};
}

Status ModelDevx::umem_dereg(const devx::Umem& u) {
  auto it = umems_.find(u.id);
  if (it == umems_.end()) return Status(Errc::kNotFound, "umem_dereg: unknown umem");
  nic_.memory().unpin(it->second.addr);
  umems_.erase(it);
  return {};
}

Result<devx::Uar> ModelDevx::alloc_uar() {
  const uint32_t page = nic_.alloc_uar();
  uars_.insert(page);
  return devx::Uar{page, nic_.uar_va(page) + mlx5::kBfOffset, page};
}

Status ModelDevx::free_uar(const devx::Uar& u) {
  return uars_.erase(u.page_id) ? Status() : Status(Errc::kNotFound, "free_uar: unknown UAR");
}

Result<devx::Mr> ModelDevx::reg_mr(uint32_t pdn, void* addr, size_t len, uint32_t access) {
  if (!pds_.count(pdn)) return Status(Errc::kNotFound, "reg_mr: PD not allocated in this context");
  Result<uint32_t> k = nic_.reg_mr(pdn, reinterpret_cast<uint64_t>(addr), len, access);
  if (!k) return k.status();
  mrs_.insert(*k);
  return devx::Mr{*k, *k, *k};
}

Status ModelDevx::dereg_mr(const devx::Mr& m) {
  if (!mrs_.erase(m.lkey)) return Status(Errc::kNotFound, "dereg_mr: unknown MR");
  return nic_.dereg_mr(m.lkey);
}

Result<devx::Obj> ModelDevx::create_srq(uint32_t pdn, uint32_t max_wr) {
  if (!pds_.count(pdn)) return Status(Errc::kNotFound, "create_srq: PD not allocated in this context");
  Result<uint32_t> s = nic_.create_srq(pdn, max_wr);
  if (!s) return s.status();
  srqs_.insert(*s);
  return obj(*s);
}

Result<devx::Obj> ModelDevx::create_verbs_cq(uint32_t cqe) {
  uint32_t log = 0;
  while ((1u << log) < cqe) ++log;
  Result<void*> buf = alloc(uint64_t(64) << log, false);
  Result<void*> dbr = alloc(64, false);
  if (!buf || !dbr) return Status(Errc::kNoResource, "create_verbs_cq: no memory");
  std::memset(*buf, 0xff, uint64_t(64) << log);
  Result<uint32_t> c = nic_.create_cq({log, reinterpret_cast<uint64_t>(*buf), reinterpret_cast<uint64_t>(*dbr), false});
  if (!c) return c.status();
  cqs_.insert(*c);
  return obj(*c);
}

Status ModelDevx::destroy_verbs_cq(const devx::Obj& o) {
  const mock_nic::Cq* cq = cqs_.count(o.id) ? nic_.cq(o.id) : nullptr;
  if (cq == nullptr) return Status(Errc::kNotFound, "destroy_verbs_cq: not a CQ of this context");
  void *buf = reinterpret_cast<void*>(cq->buf_va), *dbr = reinterpret_cast<void*>(cq->dbr_va);
  if (Status st = nic_.destroy_cq(o.id); !st) return st;  // a QP still completes to it
  cqs_.erase(o.id);
  free(buf), free(dbr);
  return {};
}

// ---- queue memory ----

// Queue sets (CQ rings, DBRs, send rings) and the ibuf, zeroed by calloc rather than by a
// memset over the block (calloc skips the clear where the pages are fresh). The symmetric
// heap does not come from here: it reserves its own untouched pages (core/heap).
Result<void*> ModelDevx::alloc(size_t bytes, bool gpu) {
  void* base = std::calloc(1, round_page(bytes) + 4096);
  if (base == nullptr) return Status(Errc::kNoResource, "model memory: out of host memory");
  void* p = reinterpret_cast<void*>(round_page(reinterpret_cast<uintptr_t>(base)));
  if (Status st = nic_.memory().map_external(p, round_page(bytes), gpu ? mem::MemKind::kGpu : mem::MemKind::kHost, "devx");
      !st) {
    std::free(base);
    return st;
  }
  allocations_[p] = {base, bytes};
  return p;
}

void ModelDevx::free(void* p) {
  auto it = allocations_.find(p);
  if (it == allocations_.end()) return;
  void* base = it->second.base;
  allocations_.erase(it);
  std::erase_if(saved_, [p](const Saved& s) { return s.at == p; });
  (void)nic_.memory().free(reinterpret_cast<uint64_t>(p));
  std::free(base);
}

// ---- PRM objects ----

bool ModelDevx::umem_range(uint32_t id, uint64_t offset, uint64_t len, uint64_t align, uint64_t* va,
                           DevxSyndrome* why) const {
  auto it = umems_.find(id);
  if (it == umems_.end()) return *why = DevxSyndrome::kUnknownUmem, false;
  if (offset > it->second.size || len > it->second.size - offset) return *why = DevxSyndrome::kUmemRange, false;
  *va = it->second.addr + offset;
  if (*va % align != 0) return *why = DevxSyndrome::kMisaligned, false;
  return true;
}

DevxSyndrome ModelDevx::check_cq(uint32_t cqn) const {
  if (cqs_.count(cqn)) return DevxSyndrome::kNone;
  return nic_.cq(cqn) != nullptr ? DevxSyndrome::kCqOtherContext : DevxSyndrome::kUnknownCq;
}

Result<devx::Obj> ModelDevx::obj_create(const void* in, size_t inlen, void* out, size_t outlen) {
  if (outlen < sizeof(mbox_out) / 8) return Status(Errc::kBadParam, "obj_create: reply buffer shorter than a mailbox");
  std::memset(out, 0, outlen);
  if (inlen < sizeof(mbox_in) / 8) return reject(out, DevxSyndrome::kInputTooShort);
  const auto op = uint16_t(DB_GET(mbox_in, in, opcode));
  switch (op) {
    case kCreateCq:
      if (inlen < sizeof(create_cq_in) / 8) return reject(out, DevxSyndrome::kInputTooShort, "CREATE_CQ");
      if (outlen < sizeof(create_cq_out) / 8) return reject(out, DevxSyndrome::kOutputTooShort, "CREATE_CQ");
      return create_cq(in, out);
    case kCreateQp:
#ifndef DOORBELL_PLANT  // planted for fuzz/devx_fuzz: no length check on CREATE_QP
      if (inlen < sizeof(create_qp_in) / 8) return reject(out, DevxSyndrome::kInputTooShort, "CREATE_QP");
#endif
      if (outlen < sizeof(create_qp_out) / 8) return reject(out, DevxSyndrome::kOutputTooShort, "CREATE_QP");
      return create_qp(in, out);
    case kCreateDct:
      if (inlen < sizeof(create_dct_in) / 8) return reject(out, DevxSyndrome::kInputTooShort, "CREATE_DCT");
      if (outlen < sizeof(create_dct_out) / 8) return reject(out, DevxSyndrome::kOutputTooShort, "CREATE_DCT");
      return create_dct(in, out);
    default: return reject(out, DevxSyndrome::kUnknownOpcode, "opcode 0x" + std::to_string(op));
  }
}

Status ModelDevx::general_cmd(const void* in, size_t inlen, void* out, size_t outlen) {
  if (outlen < sizeof(mbox_out) / 8) return Status(Errc::kBadParam, "general_cmd: reply buffer shorter than a mailbox");
  std::memset(out, 0, outlen);
  if (inlen < sizeof(query_hca_cap_in) / 8) return reject(out, DevxSyndrome::kInputTooShort);
  const auto op = uint16_t(DB_GET(mbox_in, in, opcode));
  if (op != kQueryHcaCap) return reject(out, DevxSyndrome::kUnknownOpcode, "general command 0x" + std::to_string(op));
  if (outlen < sizeof(query_hca_cap_out) / 8) return reject(out, DevxSyndrome::kOutputTooShort, "QUERY_HCA_CAP");
  void* cap = DB_BYTES(query_hca_cap_out, out, capability);
  switch (DB_GET(query_hca_cap_in, in, op_mod) >> 1) {
    case kHcaCapGeneral:
      DB_SET(cmd_hca_cap, cap, cqe_version, 1);
      DB_SET(cmd_hca_cap, cap, log_bf_reg_size, 9);  // 512-byte BlueFlame registers
      return {};
    case kHcaCapAtomic:  // every atomic the engine executes; 8-byte operands in host order
      DB_SET(atomic_caps, cap, atomic_operations, kAtomicOpCas | kAtomicOpFa | kAtomicOpMaskedCas | kAtomicOpMaskedFa);
      DB_SET(atomic_caps, cap, atomic_size_qp, kAtomicSize4 | kAtomicSize8);
      DB_SET(atomic_caps, cap, atomic_size_dc, kAtomicSize4 | kAtomicSize8);
      DB_SET(atomic_caps, cap, atomic_req_8B_endianness_mode, 1);
      DB_SET(atomic_caps, cap, supported_atomic_req_8B_endianness_mode_1, 1);
      return {};
    default:
      return reject(out, DevxSyndrome::kUnknownOpcode, "QUERY_HCA_CAP page " + std::to_string(DB_GET(query_hca_cap_in, in, op_mod) >> 1));
  }
}

Result<devx::Obj> ModelDevx::create_cq(const void* in, void* out) {
  const uint32_t log = uint32_t(DB_GET(create_cq_in, in, cq_context.log_cq_size));
  if (log > 22) return reject(out, DevxSyndrome::kBadCqSize);
  if (DB_GET(create_cq_in, in, cq_context.cqe_sz) != 0) return reject(out, DevxSyndrome::kCqeSizeUnsupported);
  if (!DB_GET(create_cq_in, in, cq_umem_valid) || !DB_GET(create_cq_in, in, cq_context.dbr_umem_valid))
    return reject(out, DevxSyndrome::kUmemNotValid);
  const uint32_t uar = uint32_t(DB_GET(create_cq_in, in, cq_context.uar_page));
  if (!uars_.count(uar)) return reject(out, DevxSyndrome::kUnknownUar);
  uint64_t buf_va, dbr_va;
  DevxSyndrome why;
  if (!umem_range(uint32_t(DB_GET(create_cq_in, in, cq_umem_id)), DB_GET(create_cq_in, in, cq_umem_offset),
                  uint64_t(64) << log, 64, &buf_va, &why))
    return reject(out, why, "CQ buffer");
  if (!umem_range(uint32_t(DB_GET(create_cq_in, in, cq_context.dbr_umem_id)), DB_GET(create_cq_in, in, cq_context.dbr_addr),
                  sizeof(mlx5::CqDoorbellRecord), 8, &dbr_va, &why))
    return reject(out, why, "CQ doorbell record");
  Result<uint32_t> cqn = nic_.create_cq(
      {log, buf_va, dbr_va, DB_GET(create_cq_in, in, cq_context.cc) != 0, DB_GET(create_cq_in, in, cq_context.oi) != 0});
  if (!cqn) return reject(out, DevxSyndrome::kModelRefused, cqn.status().message());
  cqs_.insert(*cqn);
  cq_uar_[*cqn] = uar;
  DB_SET(create_cq_out, out, cqn, *cqn);
  return obj(*cqn);
}

Result<devx::Obj> ModelDevx::create_qp(const void* in, void* out) {
  const auto st = uint8_t(DB_GET(create_qp_in, in, qp_context.st));
  if (st != kQpcStRc && st != kQpcStDci) return reject(out, DevxSyndrome::kQpTypeUnsupported);
  const uint32_t pd = uint32_t(DB_GET(create_qp_in, in, qp_context.pd));
  if (!pds_.count(pd)) return reject(out, DevxSyndrome::kUnknownPd);
  const uint32_t uar = uint32_t(DB_GET(create_qp_in, in, qp_context.uar_page));
  if (!uars_.count(uar)) return reject(out, DevxSyndrome::kUnknownUar);
  const uint32_t log_sq = uint32_t(DB_GET(create_qp_in, in, qp_context.log_sq_size));
  if (log_sq > 15 || DB_GET(create_qp_in, in, qp_context.no_sq)) return reject(out, DevxSyndrome::kBadSqSize);
  const uint32_t snd = uint32_t(DB_GET(create_qp_in, in, qp_context.cqn_snd));
  if (DevxSyndrome s = check_cq(snd); s != DevxSyndrome::kNone) return reject(out, s, "send CQ " + std::to_string(snd));
  QpAttr a;
  const auto rq_type = uint8_t(DB_GET(create_qp_in, in, qp_context.rq_type));
  if (rq_type == kRqTypeSrq) {
    a.srqn = uint32_t(DB_GET(create_qp_in, in, qp_context.srqn_rmpn_xrqn));
    if (!srqs_.count(a.srqn)) return reject(out, DevxSyndrome::kUnknownSrq);
    a.recv_cqn = uint32_t(DB_GET(create_qp_in, in, qp_context.cqn_rcv));
    if (DevxSyndrome s = check_cq(a.recv_cqn); s != DevxSyndrome::kNone)
      return reject(out, s, "receive CQ " + std::to_string(a.recv_cqn));
  } else if (rq_type != kRqTypeZeroSize) {
    return reject(out, DevxSyndrome::kRqTypeUnsupported);
  }
  if (!DB_GET(create_qp_in, in, wq_umem_valid) || !DB_GET(create_qp_in, in, qp_context.dbr_umem_valid))
    return reject(out, DevxSyndrome::kUmemNotValid);
  DevxSyndrome why;
  if (!umem_range(uint32_t(DB_GET(create_qp_in, in, wq_umem_id)), DB_GET(create_qp_in, in, wq_umem_offset),
                  uint64_t(mlx5::kWqebb) << log_sq, mlx5::kWqebb, &a.sq_va, &why))
    return reject(out, why, "WQ buffer");
  if (!umem_range(uint32_t(DB_GET(create_qp_in, in, qp_context.dbr_umem_id)), DB_GET(create_qp_in, in, qp_context.dbr_addr),
                  sizeof(mlx5::QpDoorbellRecord), 8, &a.dbr_va, &why))
    return reject(out, why, "QP doorbell record");
  a.pd = pd;
  a.send_cqn = snd;
  a.log_sq_size = log_sq;
  a.uar_page = uar;
  a.dc = st == kQpcStDci;  // accepted (NVSHMEM always makes one); its WQEs fail plainly
  Result<uint32_t> qpn = nic_.create_qp(a);
  if (!qpn) return reject(out, DevxSyndrome::kModelRefused, qpn.status().message());
  qps_.insert(*qpn);
  DB_SET(create_qp_out, out, qpn, *qpn);
  return obj(*qpn);
}

// A DCT: its PD, receive CQ and SRQ from this context, port 1, an MTU the link has; active
// (RTR) at once with its key and rights.
Result<devx::Obj> ModelDevx::create_dct(const void* in, void* out) {
  const uint32_t pd = uint32_t(DB_GET(create_dct_in, in, dct_context_entry.pd));
  if (!pds_.count(pd)) return reject(out, DevxSyndrome::kUnknownPd);
  DctAttr a;
  a.pd = pd;
  a.recv_cqn = uint32_t(DB_GET(create_dct_in, in, dct_context_entry.cqn));
  if (DevxSyndrome s = check_cq(a.recv_cqn); s != DevxSyndrome::kNone) return reject(out, s, "DCT CQ " + std::to_string(a.recv_cqn));
  a.srqn = uint32_t(DB_GET(create_dct_in, in, dct_context_entry.srqn_xrqn));
  if (!srqs_.count(a.srqn)) return reject(out, DevxSyndrome::kUnknownSrq);
  if (DB_GET(create_dct_in, in, dct_context_entry.port) != 1) return reject(out, DevxSyndrome::kBadPort);
  const uint64_t mtu = DB_GET(create_dct_in, in, dct_context_entry.mtu);
  if (mtu < 1 || mtu > 5) return reject(out, DevxSyndrome::kBadMtu);
  a.dc_key = DB_GET(create_dct_in, in, dct_context_entry.dc_access_key);
  if (DB_GET(create_dct_in, in, dct_context_entry.rwe)) a.remote_access |= kRemoteWrite;
  if (DB_GET(create_dct_in, in, dct_context_entry.rre)) a.remote_access |= kRemoteRead;
  if (DB_GET(create_dct_in, in, dct_context_entry.rae)) a.remote_access |= kRemoteAtomic;
  a.atomic_mode = uint8_t(DB_GET(create_dct_in, in, dct_context_entry.atomic_mode));
  Result<uint32_t> dctn = nic_.create_dct(a);
  if (!dctn) return reject(out, DevxSyndrome::kModelRefused, dctn.status().message());
  dcts_.insert(*dctn);
  DB_SET(create_dct_out, out, dctn, *dctn);
  return obj(*dctn);
}

Status ModelDevx::obj_modify(const devx::Obj& o, const void* in, size_t inlen, void* out, size_t outlen) {
  if (outlen < sizeof(mbox_out) / 8) return Status(Errc::kBadParam, "obj_modify: reply buffer shorter than a mailbox");
  std::memset(out, 0, outlen);
  if (inlen < sizeof(qp_by_number_in) / 8) return reject(out, DevxSyndrome::kInputTooShort);
  const auto op = uint16_t(DB_GET(mbox_in, in, opcode));
  const bool full = op == kRst2InitQp || op == kInit2RtrQp || op == kRtr2RtsQp || op == kRts2RtsQp;
  if (!full && op != kQp2Err && op != kQp2Rst) return reject(out, DevxSyndrome::kUnknownOpcode, opcode_name(op));
  if (full && inlen < sizeof(modify_qp_in) / 8) return reject(out, DevxSyndrome::kInputTooShort, opcode_name(op));
  if (!qps_.count(o.id)) return reject(out, DevxSyndrome::kUnknownQp);
  if (DB_GET(qp_by_number_in, in, qpn) != o.id) return reject(out, DevxSyndrome::kQpnMismatch);
  const QpState cur = nic_.qp(o.id)->state;
  const QpState need = op == kRst2InitQp ? QpState::kRst : op == kInit2RtrQp ? QpState::kInit
                     : op == kRtr2RtsQp ? QpState::kRtr : QpState::kRts;
  if (full && cur != need)
    return reject(out, DevxSyndrome::kIllegalTransition,
                  std::string(opcode_name(op)) + " from " + qp_state_name(cur));
  Status st;
  switch (op) {
    case kRst2InitQp: {
      if (DB_GET(modify_qp_in, in, qp_context.primary_address_path.vhca_port_num) != 1) return reject(out, DevxSyndrome::kBadPort);
      uint32_t acc = 0;
      if (DB_GET(modify_qp_in, in, qp_context.rwe)) acc |= kRemoteWrite;
      if (DB_GET(modify_qp_in, in, qp_context.rre)) acc |= kRemoteRead;
      if (DB_GET(modify_qp_in, in, qp_context.rae)) acc |= kRemoteAtomic;
      st = nic_.modify_qp(o.id, QpState::kInit);
      if (st) st = nic_.set_qp_access(o.id, acc);
      if (st) st = nic_.set_qp_atomic_mode(o.id, uint8_t(DB_GET(modify_qp_in, in, qp_context.atomic_mode)));
      break;
    }
    case kInit2RtrQp: {
      const uint64_t mtu = DB_GET(modify_qp_in, in, qp_context.mtu);
      if (mtu < 1 || mtu > 5) return reject(out, DevxSyndrome::kBadMtu);
      QpPeer peer{0, uint32_t(DB_GET(modify_qp_in, in, qp_context.remote_qpn))};
      if (DB_GET(modify_qp_in, in, qp_context.primary_address_path.grh)) {
        // Global routing: find the port that owns the destination GID (unknown: unreachable).
        uint8_t gid[16];
        std::memcpy(gid, DB_BYTES(modify_qp_in, const_cast<void*>(in), qp_context.primary_address_path.rgid_rip), 16);
        const Nic* dst = nic_.fabric() != nullptr ? nic_.fabric()->by_gid(gid)
                                                  : (std::equal(gid, gid + 16, nic_.gid().begin()) ? &nic_ : nullptr);
        peer.lid = dst != nullptr ? dst->lid() : 0;
      } else {
        peer.lid = uint16_t(DB_GET(modify_qp_in, in, qp_context.primary_address_path.rlid));
      }
      QpTimers t = nic_.qp(o.id)->timers;
      t.min_rnr_nak = uint8_t(DB_GET(modify_qp_in, in, qp_context.min_rnr_nak));
      st = nic_.set_qp_timers(o.id, t);
      if (st) st = nic_.modify_qp(o.id, QpState::kRtr, &peer);
      break;
    }
    case kRts2RtsQp: st = nic_.modify_qp(o.id, QpState::kRts); break;
    case kRtr2RtsQp: {
      QpTimers t = nic_.qp(o.id)->timers;
      t.ack_timeout = uint8_t(DB_GET(modify_qp_in, in, qp_context.primary_address_path.ack_timeout));
      t.retry_count = uint8_t(DB_GET(modify_qp_in, in, qp_context.retry_count));
      t.rnr_retry = uint8_t(DB_GET(modify_qp_in, in, qp_context.rnr_retry));
      st = nic_.set_qp_timers(o.id, t);
      if (st) st = nic_.modify_qp(o.id, QpState::kRts);
      break;
    }
    case kQp2Err: st = nic_.modify_qp(o.id, QpState::kErr); break;
    case kQp2Rst: st = nic_.modify_qp(o.id, QpState::kRst); break;
  }
  if (!st) return reject(out, DevxSyndrome::kModelRefused, st.message());
  return {};
}

Status ModelDevx::obj_query(const devx::Obj& o, const void* in, size_t inlen, void* out, size_t outlen) {
  if (outlen < sizeof(mbox_out) / 8) return Status(Errc::kBadParam, "obj_query: reply buffer shorter than a mailbox");
  std::memset(out, 0, outlen);
  if (inlen < sizeof(mbox_in) / 8) return reject(out, DevxSyndrome::kInputTooShort);
  const auto op = uint16_t(DB_GET(mbox_in, in, opcode));
  if (op == kQueryQp) {
    if (inlen < sizeof(query_qp_in) / 8) return reject(out, DevxSyndrome::kInputTooShort);
    if (outlen < sizeof(query_qp_out) / 8) return reject(out, DevxSyndrome::kOutputTooShort);
    if (!qps_.count(o.id)) return reject(out, DevxSyndrome::kUnknownQp);
    if (DB_GET(query_qp_in, in, qpn) != o.id) return reject(out, DevxSyndrome::kQpnMismatch);
    const Qp* q = nic_.qp(o.id);
    DB_SET(query_qp_out, out, qp_context.state, to_qpc(q->state));
    DB_SET(query_qp_out, out, qp_context.st, kQpcStRc);
    DB_SET(query_qp_out, out, qp_context.pd, q->attr.pd);
    DB_SET(query_qp_out, out, qp_context.log_sq_size, q->attr.log_sq_size);
    DB_SET(query_qp_out, out, qp_context.uar_page, q->attr.uar_page);
    DB_SET(query_qp_out, out, qp_context.remote_qpn, q->peer.qpn);
    DB_SET(query_qp_out, out, qp_context.next_rcv_psn, q->rcv_upto & 0xffffff);  // the model numbers PSNs by WQE index
    DB_SET(query_qp_out, out, qp_context.cqn_snd, q->attr.send_cqn);
    DB_SET(query_qp_out, out, qp_context.hw_sq_wqebb_counter, q->head & 0xffff);
    DB_SET(query_qp_out, out, qp_context.sw_sq_wqebb_counter, q->dbr->snd.get() & 0xffff);
    return {};
  }
  if (op == kQueryCq) {
    if (inlen < sizeof(query_cq_in) / 8) return reject(out, DevxSyndrome::kInputTooShort);
    if (outlen < sizeof(query_cq_out) / 8) return reject(out, DevxSyndrome::kOutputTooShort);
    if (!cqs_.count(o.id)) return reject(out, DevxSyndrome::kUnknownCq);
    if (DB_GET(query_cq_in, in, cqn) != o.id) return reject(out, DevxSyndrome::kWrongObject);
    const Cq* c = nic_.cq(o.id);
    DB_SET(query_cq_out, out, cq_context.log_cq_size, c->log_size);
    DB_SET(query_cq_out, out, cq_context.cc, c->collapsed);
    DB_SET(query_cq_out, out, cq_context.uar_page, cq_uar_.count(o.id) ? cq_uar_.at(o.id) : 0);
    DB_SET(query_cq_out, out, cq_context.producer_counter, c->pi & 0xffffff);
    DB_SET(query_cq_out, out, cq_context.consumer_counter, c->dbr->set_ci.get() & 0xffffff);
    return {};
  }
  return reject(out, DevxSyndrome::kUnknownOpcode, opcode_name(op));
}

Status ModelDevx::obj_destroy(const devx::Obj& o, const void* in, size_t inlen) {
  Buf<mbox_out> out{};
  auto fail = [&](DevxSyndrome s, const std::string& d = {}) {
    Status t = reject(out.data(), s, d);
    return devx::command_error(in, out.data(), t, this);
  };
  // Too short to name its opcode: the mailbox reply alone (command_error would read the header).
  if (inlen < sizeof(qp_by_number_in) / 8) return reject(out.data(), DevxSyndrome::kInputTooShort, "destroy");
  const auto op = uint16_t(DB_GET(mbox_in, in, opcode));
  if (op == kDestroyQp) {
    if (!qps_.count(o.id)) return fail(DevxSyndrome::kUnknownQp);
    if (DB_GET(destroy_qp_in, in, qpn) != o.id) return fail(DevxSyndrome::kQpnMismatch);
    if (Status st = nic_.destroy_qp(o.id); !st) return fail(DevxSyndrome::kModelRefused, st.message());
    qps_.erase(o.id);
    return {};
  }
  if (op == kDestroyDct) {
    if (!dcts_.count(o.id)) return fail(DevxSyndrome::kWrongObject, "not a DCT of this context");
    if (DB_GET(destroy_dct_in, in, dctn) != o.id) return fail(DevxSyndrome::kWrongObject);
    if (Status st = nic_.destroy_qp(o.id); !st) return fail(DevxSyndrome::kModelRefused, st.message());
    dcts_.erase(o.id);
    return {};
  }
  if (op == kDestroyCq) {
    if (!cqs_.count(o.id)) return fail(DevxSyndrome::kUnknownCq);
    if (DB_GET(destroy_cq_in, in, cqn) != o.id) return fail(DevxSyndrome::kWrongObject);
    if (Status st = nic_.destroy_cq(o.id); !st) return fail(DevxSyndrome::kCqInUse, st.message());
    cqs_.erase(o.id);
    cq_uar_.erase(o.id);
    return {};
  }
  return fail(DevxSyndrome::kUnknownOpcode, opcode_name(op));
}

}  // namespace doorbell::mock_nic
