// What a device model (the NIC engine, a host proxy) tells the memory model about its own
// accesses. Devices are system-scope observers: they read and write memory directly, but a
// weak memory model must learn of their writes (so GPU threads can still read the value a
// write replaced) and can explain a device read that missed stores still buffered in a GPU
// thread. With no observer installed (the sequentially consistent model) nothing is called.
#pragma once

#include <cstddef>
#include <cstdint>

namespace doorbell::mem {

class Observer {
 public:
  virtual ~Observer() = default;
  // Called just before a device overwrites [addr, addr + len); `what` and `index` name it
  // in reports (e.g. "CQE", 5).
  virtual void device_write(const void* addr, size_t len, const char* what = "device write", uint64_t index = 0) = 0;
  // Called when a device reads [addr, addr + len); `what` and `index` name it in reports
  // (e.g. "WQE", 17 or "DBR", qpn).
  virtual void device_read(const void* addr, size_t len, const char* who, const char* what, uint64_t index) = 0;
  // A device write of the bytes memory already holds there (a put repeated into the same
  // place): no data access, as nothing anyone reads can change.
  virtual void device_rewrite(const void* addr, size_t len, const char* what, uint64_t index) { device_write(addr, len, what, index); }
  // A response's data landing in the requester's memory (a READ's, a fetching atomic's):
  // on a GPU without GPUDirect RDMA write ordering it may become visible to the GPU's threads
  // after what the NIC writes next (the CQE), until a device_flush.
  virtual void device_landing(const void* addr, size_t len, const char* what, uint64_t index) { device_write(addr, len, what, index); }
  // The NIC read the GPU's memory for a CST: the data it landed before is visible now.
  virtual void device_flush() {}
  // A device's atomic on [addr, addr + len) (a responder's atomic): a write, but one that
  // races with nothing.
  virtual void device_atomic(const void* addr, size_t len) { device_write(addr, len, "atomic", 0); }
  // The accesses that follow are made for `key` (a NIC's QP or CQ: hardware works on each
  // in its own order), named by `what` and `index`, until the next call; they come after
  // what was released to `key` (device_release).
  virtual void device_actor(const void* /*key*/, const char* /*what*/, uint64_t /*index*/) {}
  // What the device did so far for the current key comes before what it does next for `key`
  // (a completion handed from a QP to the CQ that writes it later).
  virtual void device_release(const void* /*key*/) {}
  // A host agent's command on `key` (modify a QP): the caller comes after what the device did
  // for it so far, and the device's next work for it after the command.
  virtual void device_command(const void* /*key*/) {}
};

}  // namespace doorbell::mem
