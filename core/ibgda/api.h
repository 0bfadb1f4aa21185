// The public device API in NVSHMEM's shape, in the doorbell namespace: typed put / get on
// symmetric addresses (pointers into this PE's heap, valid on every PE), atomics, quiet and
// fence. Thin wrappers over core/ibgda/ops.h: symmetric pointer -> heap offset.
//
// fence() orders earlier puts before later ones to each PE as NVSHMEM 3.4.5's does: nothing
// with one QP in all (RC delivers in order), else it waits for every QP's submitted work
// without quiet's CST (ibgda::fence_all); with failover on it is quiet (the logs replay in order).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/ibgda/ops.h"

namespace doorbell {

using ibgda::DevState;
using ibgda::OpResult;

DOORBELL_HD uint64_t sym_offset(const DevState& st, const void* p) {
  return reinterpret_cast<uint64_t>(p) - heap_base(st, st.my_pe);
}

template <class C, class T>
DOORBELL_HD OpResult put_nbi(C& ctx, const DevState& st, T* dest, const T* src, size_t nelems, int pe) {
  return ibgda::put_nbi(ctx, st, sym_offset(st, dest), sym_offset(st, src), nelems * sizeof(T), uint32_t(pe));
}
template <class C, class T>
DOORBELL_HD OpResult put(C& ctx, const DevState& st, T* dest, const T* src, size_t nelems, int pe) {
  return ibgda::put(ctx, st, sym_offset(st, dest), sym_offset(st, src), nelems * sizeof(T), uint32_t(pe));
}
template <class C, class T>
DOORBELL_HD OpResult get_nbi(C& ctx, const DevState& st, T* dest, const T* src, size_t nelems, int pe) {
  return ibgda::get_nbi(ctx, st, sym_offset(st, dest), sym_offset(st, src), nelems * sizeof(T), uint32_t(pe));
}
template <class C, class T>
DOORBELL_HD OpResult get(C& ctx, const DevState& st, T* dest, const T* src, size_t nelems, int pe) {
  return ibgda::get(ctx, st, sym_offset(st, dest), sym_offset(st, src), nelems * sizeof(T), uint32_t(pe));
}
// Warp-collective put: every lane of the warp calls it with the same arguments.
template <class C, class T>
DOORBELL_HD OpResult put_nbi_warp(C& ctx, const DevState& st, T* dest, const T* src, size_t nelems, int pe) {
  return ibgda::put_nbi_warp(ctx, st, sym_offset(st, dest), sym_offset(st, src), nelems * sizeof(T), uint32_t(pe));
}

template <class C>
DOORBELL_HD OpResult atomic_fetch_add(C& ctx, const DevState& st, uint64_t* dest, uint64_t v, int pe, uint64_t* old) {
  return ibgda::atomic_fetch_add(ctx, st, sym_offset(st, dest), v, uint32_t(pe), old);
}
template <class C>
DOORBELL_HD OpResult atomic_compare_swap(C& ctx, const DevState& st, uint64_t* dest, uint64_t cond, uint64_t v, int pe,
                                         uint64_t* old) {
  return ibgda::atomic_compare_swap(ctx, st, sym_offset(st, dest), cond, v, uint32_t(pe), old);
}
template <class C>
DOORBELL_HD OpResult atomic_swap(C& ctx, const DevState& st, uint64_t* dest, uint64_t v, int pe, uint64_t* old) {
  return ibgda::atomic_swap(ctx, st, sym_offset(st, dest), v, uint32_t(pe), old);
}
template <class C>
DOORBELL_HD OpResult atomic_add(C& ctx, const DevState& st, uint64_t* dest, uint64_t v, int pe) {
  return ibgda::atomic_add(ctx, st, sym_offset(st, dest), v, uint32_t(pe));
}
template <class C>
DOORBELL_HD OpResult quiet(C& ctx, const DevState& st) {
  return ibgda::quiet_all(ctx, st);
}
template <class C>
DOORBELL_HD OpResult fence(C& ctx, const DevState& st) {
  return ibgda::fence_all(ctx, st);  // (with failover: a quiet)
}
// p / g: one value of 1..8 bytes (an inline WRITE; a READ through the ibuf).
template <class C, class T>
DOORBELL_HD OpResult p(C& ctx, const DevState& st, T* dest, T value, int pe) {
  return ibgda::p<T>(ctx, st, sym_offset(st, dest), value, uint32_t(pe));
}
template <class C, class T>
DOORBELL_HD OpResult g(C& ctx, const DevState& st, const T* src, int pe, T* value) {
  return ibgda::g<T>(ctx, st, sym_offset(st, src), uint32_t(pe), value);
}

}  // namespace doorbell
