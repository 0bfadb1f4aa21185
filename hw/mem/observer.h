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
  // Called just before a device overwrites [addr, addr + len).
  virtual void device_write(const void* addr, size_t len) = 0;
  // Called when a device reads [addr, addr + len); `what` and `index` name it in reports
  // (e.g. "WQE", 17 or "DBR", qpn).
  virtual void device_read(const void* addr, size_t len, const char* who, const char* what, uint64_t index) = 0;
};

}  // namespace doorbell::mem
