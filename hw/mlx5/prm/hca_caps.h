// QUERY_HCA_CAP: the capability pages a DEVX client reads before it builds queues (the
// general device page and the atomic page), with the fields NVSHMEM's IBGDA set-up checks.
// Offsets from the mlx5 PRM as the kernel's mlx5_ifc.h publishes them; one u8 per bit.
#pragma once

#include <cstddef>

#include "hw/mlx5/prm/bits.h"

namespace doorbell::prm {

inline constexpr uint16_t kQueryHcaCap = 0x100;
// op_mod = cap_type << 1 | current (1: the values in force)
enum : uint16_t { kHcaCapGeneral = 0x0, kHcaCapAtomic = 0x3 };
// atomic_operations bits, and atomic sizes (bytes, as a bit per power of two)
enum : uint16_t { kAtomicOpCas = 0x1, kAtomicOpFa = 0x2, kAtomicOpMaskedCas = 0x4, kAtomicOpMaskedFa = 0x8 };
enum : uint16_t { kAtomicSize4 = 0x4, kAtomicSize8 = 0x8 };

struct query_hca_cap_in {
  u8 opcode[0x10];
  u8 uid[0x10];
  u8 reserved_at_20[0x10];
  u8 op_mod[0x10];
  u8 reserved_at_40[0x40];
};
struct query_hca_cap_out {
  u8 status[0x8];
  u8 reserved_at_8[0x18];
  u8 syndrome[0x20];
  u8 reserved_at_40[0x40];
  u8 capability[0x8000];
};

struct cmd_hca_cap {  // the general page (its first fields NVSHMEM reads)
  u8 reserved_at_0[0x1fc];
  u8 cqe_version[0x4];
  u8 compact_address_vector[0x1];
  u8 reserved_at_201[0x6a];
  u8 log_bf_reg_size[0x5];
  u8 reserved_at_270[0x8000 - 0x270];
};

struct atomic_caps {
  u8 reserved_at_0[0x40];
  u8 atomic_req_8B_endianness_mode[0x2];
  u8 reserved_at_42[0x4];
  u8 supported_atomic_req_8B_endianness_mode_1[0x1];
  u8 reserved_at_47[0x49];
  u8 atomic_operations[0x10];
  u8 reserved_at_a0[0x10];
  u8 atomic_size_qp[0x10];
  u8 reserved_at_c0[0x10];
  u8 atomic_size_dc[0x10];
  u8 reserved_at_e0[0x8000 - 0xe0];
};

static_assert(sizeof(query_hca_cap_out) / 8 == 4112 && offsetof(query_hca_cap_out, capability) == 0x80);
// Every field a client reads, at the PRM's bit offset: the model writes them with these very
// layouts, so only these lines check the layouts themselves.
static_assert(offsetof(cmd_hca_cap, cqe_version) == 0x1fc && offsetof(cmd_hca_cap, compact_address_vector) == 0x200 &&
              offsetof(cmd_hca_cap, log_bf_reg_size) == 0x26b);
static_assert(offsetof(atomic_caps, atomic_req_8B_endianness_mode) == 0x40 &&
              offsetof(atomic_caps, supported_atomic_req_8B_endianness_mode_1) == 0x46 &&
              offsetof(atomic_caps, atomic_operations) == 0x90 && offsetof(atomic_caps, atomic_size_qp) == 0xb0 &&
              offsetof(atomic_caps, atomic_size_dc) == 0xd0);

}  // namespace doorbell::prm
