// Run by mpirun (ctest mock_nic_cross_process_mpirun_2): two processes, one NIC model each,
// joined by the shared-memory links. Through the bootstrap they exchange RC handles (LID,
// QPN) and memory keys, connect two QPs each to the other's, and post RDMA WRITE, READ,
// fetch-add and compare-swap to the peer: the responder half runs in the peer's process on
// its own registered memory. Each process then checks what landed in its memory, its READ
// data and its atomics' old values; last, a WRITE with a wrong rkey gets REMOTE_ACCESS_ERR
// at the requester and moves the responder's QP to ERR, in the other process; then, on the
// second pair, a 2 MiB READ and a 1.5 MiB WRITE cross in segments (larger than one link
// message), and a segmented WRITE whose range ends past the peer's region is refused whole:
// REMOTE_ACCESS_ERR, and not one of its bytes lands; a segmented, gathered WRITE_IMM completes one
// receive at the peer with the immediate and the whole length. Last, three WRITEs to a
// responder whose QP was reset (it does not answer) are retried until it is connected again,
// then complete with every byte in place. With --async-writes the NICs send WRITEs without
// waiting for their answers (NicConfig::async_link_writes): unanswered ones are sent again;
// with --dma the NICs move bytes through a Dma (plain copies here), as behind a GPU: WRITEs
// are posted at the responder, READ data placed from the link as it comes.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "host/bootstrap/bootstrap.h"
#include "hw/mock_nic/devx/rig.h"
#include "host/bootstrap/link_join.h"

using namespace doorbell;
using namespace doorbell::mock_nic;
using namespace doorbell::mock_nic::driver;

namespace {

// Copies as a Dma makes them (its post() and flush() are the defaults: the copy at once).
class HostDma : public Dma {
 public:
  void copy(std::byte* dst, const std::byte* src, size_t len) override { ++copies, std::memmove(dst, src, len); }
  uint64_t fetch_add64(std::byte* t, uint64_t v) override { return __atomic_fetch_add(reinterpret_cast<uint64_t*>(t), v, __ATOMIC_ACQ_REL); }
  uint64_t cas64(std::byte* t, uint64_t cmp, uint64_t swap) override {
    __atomic_compare_exchange_n(reinterpret_cast<uint64_t*>(t), &cmp, swap, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return cmp;
  }
  uint32_t cas32(std::byte* t, uint32_t cmp, uint32_t swap) override {
    __atomic_compare_exchange_n(reinterpret_cast<uint32_t*>(t), &cmp, swap, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return cmp;
  }
  const char* name() const override { return "host"; }
  uint64_t copies = 0;
};

struct Handle {  // what each process publishes
  uint16_t lid;
  uint32_t qpn, qpn2, qpn3;
  uint64_t src, dst, words, big;
};
constexpr uint64_t kBig = 3 << 20;

uint8_t pattern(uint32_t rank, uint64_t i) { return uint8_t(i * 13 + rank * 101 + 5); }

int fail(uint32_t rank, const std::string& why) {
  std::fprintf(stderr, "rank %u: %s\n", rank, why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool async = false, dma = false;
  for (int i = 1; i < argc; ++i) async |= std::strcmp(argv[i], "--async-writes") == 0, dma |= std::strcmp(argv[i], "--dma") == 0;
  auto b = bootstrap::from_env();
  if (!b) return fail(0, b.status().to_string());
  bootstrap::Bootstrap& boot = **b;
  const uint32_t me = boot.rank(), n = boot.size();
  if (n != 2) return fail(me, "run with 2 processes (mpirun -np 2)");
  const uint32_t peer = 1 - me;

  auto joined = join_links(boot);
  if (!joined) return fail(me, joined.status().to_string());
  ShmLinks* links = joined->get();

  NicConfig cfg;
  cfg.lid = uint16_t(me + 1);
  cfg.async_link_writes = async;
  Rig rig(1, cfg);
  Nic& nic = rig.nic();
  HostDma host_dma;
  if (dma) nic.set_dma(&host_dma);
  // Timers on the wall clock (the retry below must outlast the peer's reconnecting, not jump
  // to its deadline when the engine idles).
  const auto t0 = std::chrono::steady_clock::now();
  nic.set_clock([t0] { return double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()); });
  if (Status s = rig.fabric.attach_remote(uint16_t(peer + 1), links, peer); !s) return fail(me, s.to_string());
  links->set_server([&rig](uint32_t, const uint8_t* req, size_t len, ShmLinks::Reply& r) { rig.fabric.serve(req, len, r); });

  const uint32_t all = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
  const uint64_t src = rig.alloc(4096), dst = rig.alloc(4096), words = rig.alloc(64), got = rig.alloc(4096);
  for (uint64_t i = 0; i < 4096; ++i) rig.mem.as<uint8_t>(src)[i] = pattern(me, i);
  const uint64_t big = rig.alloc(kBig);
  for (uint64_t i = 0; i < kBig; ++i) rig.mem.as<uint8_t>(big)[i] = pattern(me, i);
  const uint32_t key_big = rig.reg(big, kBig, all);
  const uint32_t key_src = rig.reg(src, 4096, all), key_dst = rig.reg(dst, 4096, all), key_words = rig.reg(words, 64, all),
                 key_got = rig.reg(got, 4096, all);
  (void)key_dst, (void)key_words;
  SendQueue q = rig.make_sq(0, 6, 6), q2 = rig.make_sq(0, 6, 6);
  // A third pair with a receive CQ and one receive posted: a segmented WRITE_IMM's target.
  const mock_nic::driver::CqRef rcq = rig.make_cq();
  const uint32_t srqn = rig.make_srq();
  SendQueue q3 = rig.make_sq(0, 6, 6, false, {rcq.cqn, srqn});
  rig.post_receives(srqn, 1);
  // One memory region key per process would do; each buffer has its own, the peer needs
  // dst's, src's and words' — they are consecutive registrations, so publish each.
  Handle mine{nic.lid(), q.qpn, q2.qpn, q3.qpn, src, dst, words, big};
  std::vector<Handle> hs(n);
  struct Keys {
    uint32_t src, dst, words, big;
  };
  std::vector<Keys> ks(n);
  hs[me] = mine, ks[me] = {key_src, key_dst, key_words, key_big};
  if (!boot.allgather(hs.data(), sizeof(Handle)) || !boot.allgather(ks.data(), sizeof(Keys))) return fail(me, "bootstrap");
  const Handle& p = hs[peer];
  rig.connect_to(q, p.lid, p.qpn);
  rig.connect_to(q2, p.lid, p.qpn2);
  rig.connect_to(q3, p.lid, p.qpn3);
  if (!boot.barrier()) return fail(me, "bootstrap");

  // WRITE 1 KiB into the peer's dst, READ 512 B of its src, fetch-add its word 0, CAS its word 1.
  q.write(key_src, src, 1024, ks[peer].dst, p.dst + 1024 * me);
  q.read(key_got, got, 512, ks[peer].src, p.src + 64);
  q.atomic(mlx5::WqeOpcode::kAtomicFa, 10 * (me + 1), 0, key_got, got + 1024, ks[peer].words, p.words);
  q.atomic(mlx5::WqeOpcode::kAtomicCs, 100 + me, 0, key_got, got + 1032, ks[peer].words, p.words + 8);
  q.ring_doorbell();
  std::string why;
  // The next CQE of `sq`, the NIC run and the peer's requests served meanwhile (null: none came).
  auto next_cqe = [&](SendQueue& sq) {
    const Cqe64* c = nullptr;
    for (int spins = 0; c == nullptr && spins < 10'000'000; ++spins) nic.progress(), links->serve(), c = sq.poll();
    return c;
  };
  // `n` good CQEs of `sq` in a row.
  auto good_cqes = [&](SendQueue& sq, int n) {
    for (int k = 0; k < n; ++k)
      if (const Cqe64* c = next_cqe(sq); c == nullptr || c->opcode() != uint8_t(CqeOpcode::kReq)) return false;
    return true;
  };
  if (!good_cqes(q, 4)) return fail(me, "the WRITE, READ and atomics did not all complete");
  if (!links->serve_until_all_done(&why)) return fail(me, why);
  if (!boot.barrier()) return fail(me, "bootstrap");

  // The next CQE of `sq` is an error CQE with syndrome `want`.
  auto error_cqe = [&](SendQueue& sq, CqeSyndrome want) {
    const Cqe64* c = next_cqe(sq);
    return c != nullptr && c->opcode() == uint8_t(CqeOpcode::kReqErr) && reinterpret_cast<const ErrCqe64*>(c)->syndrome == uint8_t(want);
  };

  // What the peer did to this process's memory, and what came back.
  for (uint64_t i = 0; i < 1024; ++i)
    if (rig.mem.as<uint8_t>(dst)[1024 * peer + i] != pattern(peer, i)) return fail(me, "the peer's WRITE: byte " + std::to_string(i));
  for (uint64_t i = 0; i < 512; ++i)
    if (rig.mem.as<uint8_t>(got)[i] != pattern(peer, 64 + i)) return fail(me, "READ data: byte " + std::to_string(i));
  const uint64_t* w = rig.mem.as<uint64_t>(words);
  const uint64_t* res = rig.mem.as<uint64_t>(got + 1024);
  if (w[0] != 10 * (peer + 1) || w[1] != 100 + peer) return fail(me, "the peer's atomics left " + std::to_string(w[0]) + ", " + std::to_string(w[1]));
  if (res[0] != 0 || res[1] != 0) return fail(me, "old values " + std::to_string(res[0]) + ", " + std::to_string(res[1]) + " (want 0, 0)");

  // A wrong rkey: rank 0's WRITE fails with REMOTE_ACCESS_ERR; rank 1's QP goes to ERR.
  if (me == 0) {
    q.write(key_src, src, 64, ks[peer].dst ^ 0x80, p.dst);
    q.ring_doorbell();
    if (!error_cqe(q, CqeSyndrome::kRemoteAccessErr)) return fail(me, "a wrong rkey did not give REMOTE_ACCESS_ERR");
  }
  if (!links->serve_until_all_done(&why)) return fail(me, why);
  if (me == 1 && nic.qp(q.qpn)->state != QpState::kErr) return fail(me, "the responder's QP is not in ERR after a wrong rkey");
  // Segmented transfers on the second QP pair (the first is in ERR by now), from rank 1: a READ
  // of rank 0's first 2 MiB + 100 into its own region, then a WRITE of 1.5 MiB of its own
  // bytes into rank 0's at 1 MiB (in order: the READ saw rank 0's own bytes).
  constexpr uint64_t kRead = (2 << 20) + 100, kWrite = 3 << 19, kAt = 1 << 20;
  if (me == 1) {
    const uint64_t into = rig.alloc(kRead);
    q2.read(rig.reg(into, kRead, all), into, uint32_t(kRead), ks[peer].big, p.big);
    q2.write(key_big, big, uint32_t(kWrite), ks[peer].big, p.big + kAt);
    q2.ring_doorbell();
    if (!good_cqes(q2, 2)) return fail(me, "a segmented transfer failed");
    for (uint64_t i = 0; i < kRead; ++i)
      if (rig.mem.as<uint8_t>(into)[i] != pattern(peer, i)) return fail(me, "segmented READ: byte " + std::to_string(i));
    // Past the end of rank 0's region by 0.5 MiB: refused at the first segment.
    q2.write(key_big, big, 1 << 20, ks[peer].big, p.big + kBig - (1 << 19));
    q2.ring_doorbell();
    if (!error_cqe(q2, CqeSyndrome::kRemoteAccessErr)) return fail(me, "a segmented WRITE past the region did not give REMOTE_ACCESS_ERR");
  }
  if (!links->serve_until_all_done(&why)) return fail(me, why);
  if (me == 0) {
    const uint8_t* b = rig.mem.as<uint8_t>(big);
    for (uint64_t i = 0; i < kWrite; ++i)
      if (b[kAt + i] != pattern(peer, i)) return fail(me, "segmented WRITE: byte " + std::to_string(i));
    for (uint64_t i = kAt + kWrite; i < kBig; ++i)
      if (b[i] != pattern(me, i)) return fail(me, "a refused WRITE landed: byte " + std::to_string(i));
  }
  // A WRITE_IMM of 600 KiB (three segments) from rank 1, gathered from three pieces of its
  // region out of order, so that segments begin inside pieces: rank 0's receive completes
  // once, with the immediate and the whole length, and the bytes land in gather order.
  constexpr uint64_t kImmBytes = 600 << 10;
  // (offset, length); segments begin 156 KiB + 11 into the second piece and 212 KiB + 11 into
  // the third, off the 256-byte period of pattern(), so a slip shows
  constexpr uint64_t kGather[3][2] = {{(300 << 10) + 37, (100 << 10) - 11}, {0, 300 << 10}, {(400 << 10) + 101, (200 << 10) + 11}};
  auto gathered = [&kGather](uint64_t i) {  // the source offset of the message's byte i
    for (const auto& g : kGather) {
      if (i < g[1]) return g[0] + i;
      i -= g[1];
    }
    return ~uint64_t{0};
  };
  if (me == 1) {
    auto w = q3.begin(WqeOpcode::kRdmaWriteImm, kCtrlCqUpdate, 0, 0xfeed);
    set_raddr_seg(w.seg<WqeRaddrSeg>(1), p.big, ks[peer].big);
    for (uint32_t k = 0; k < 3; ++k) set_data_seg(w.seg<WqeDataSeg>(2 + k), uint32_t(kGather[k][1]), key_big, big + kGather[k][0]);
    w.ds = 5;
    q3.finish(w);
    q3.ring_doorbell();
    if (!good_cqes(q3, 1)) return fail(me, "the segmented WRITE_IMM did not complete");
  }
  if (!links->serve_until_all_done(&why)) return fail(me, why);
  if (me == 0) {
    const Cqe64* rc = rig.mem.as<Cqe64>(rcq.va);
    if (rc->opcode() != uint8_t(CqeOpcode::kRespWrImm) || rc->imm_inval_pkey.get() != 0xfeedu || rc->byte_cnt.get() != kImmBytes)
      return fail(me, "segmented WRITE_IMM: receive CQE opcode " + std::to_string(rc->opcode()) + ", byte_cnt " +
                          std::to_string(rc->byte_cnt.get()) + " (want " + std::to_string(kImmBytes) + ")");
    for (uint64_t i = 0; i < kImmBytes; ++i)
      if (rig.mem.as<uint8_t>(big)[i] != pattern(peer, gathered(i))) return fail(me, "segmented WRITE_IMM: byte " + std::to_string(i));
  }
  // A fetch-add whose old value lands in rank 0's memory, then a WRITE on the same QP: the
  // WRITE lands nothing at rank 0 (its old value, overwritten meanwhile, stays so).
  if (me == 0) {
    q3.atomic(mlx5::WqeOpcode::kAtomicFa, 1, 0, key_got, got + 2048, ks[peer].words, p.words + 16);
    q3.ring_doorbell();
    if (!good_cqes(q3, 1)) return fail(me, "a fetch-add on the third QP did not complete");
    rig.mem.as<uint64_t>(got + 2048)[0] = 0x5a5a5a5a;
    q3.write(key_src, src, 64, ks[peer].dst, p.dst + 3072);
    q3.ring_doorbell();
    if (!good_cqes(q3, 1)) return fail(me, "a WRITE after a fetch-add did not complete");
    if (const uint64_t v = rig.mem.as<uint64_t>(got + 2048)[0]; v != 0x5a5a5a5a)
      return fail(me, "a WRITE landed a stale fetch-add result in the requester's memory: " + std::to_string(v));
  }
  if (!links->serve_until_all_done(&why)) return fail(me, why);
  // Rank 1 resets its third QP: rank 0's WRITEs to it go unanswered and are retried (and,
  // sent without waiting, sent again) until rank 1 connects it again.
  if (me == 1 && !nic.modify_qp(q3.qpn, QpState::kRst)) return fail(me, "resetting the third QP");
  if (!links->serve_until_all_done(&why)) return fail(me, why);
  if (me == 0) {
    for (uint32_t k = 0; k < 3; ++k) q3.write(key_src, src + 256 * k, 200, ks[peer].dst, p.dst + 2048 + 256 * k);
    q3.ring_doorbell();
    const Qp* mine3 = nic.qp(q3.qpn);
    for (int spins = 0; mine3->retry_deadline_ns < 0 && spins < 10'000'000; ++spins) nic.progress(), links->serve();
    if (mine3->retry_deadline_ns < 0) return fail(me, "WRITEs to a reset QP were not retried");
  }
  if (!links->serve_until_all_done(&why)) return fail(me, why);
  if (me == 1) rig.connect_to(q3, p.lid, p.qpn3);
  if (!links->serve_until_all_done(&why)) return fail(me, why);
  if (me == 0 && !good_cqes(q3, 3)) return fail(me, "WRITEs retried until the responder answered did not all complete");
  if (!links->serve_until_all_done(&why)) return fail(me, why);
  if (me == 1)
    for (uint64_t k = 0; k < 3; ++k)
      for (uint64_t i = 0; i < 200; ++i)
        if (rig.mem.as<uint8_t>(dst)[2048 + 256 * k + i] != pattern(peer, 256 * k + i))
          return fail(me, "a retried WRITE: byte " + std::to_string(256 * k + i));
  if (!boot.barrier()) return fail(me, "bootstrap");
  std::printf("rank %u: cross-process NIC models: WRITE, READ, fetch-add, compare-swap, segmented READ / WRITE / WRITE_IMM, a wrong rkey and WRITEs retried until answered over the links%s%s: OK (%llu WQEs executed here)\n",
              me, async ? ", WRITEs sent without waiting" : "", dma ? ", bytes through a Dma" : "", (unsigned long long)nic.qp(q.qpn)->stats.wqes);
  return 0;
}
