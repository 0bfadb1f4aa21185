// User-level fibers for the CPU GPU model: each GPU lane (and each device agent, such as a
// NIC engine) runs on its own stack, and control passes between a fiber and the scheduler
// with a hand-written context switch (callee-saved registers + stack pointer; a few ns, no
// system call). Switches are annotated for AddressSanitizer.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace doorbell::gpu_sim {

class Fiber {
 public:
  // A fiber that will run `fn(arg)` on a stack of `stack_bytes` when first resumed (no
  // allocation but the pooled stack: the scheduler builds a fiber per lane per run).
  Fiber(void (*fn)(void*), void* arg, size_t stack_bytes);
  // The same for a callable.
  Fiber(std::function<void()> body, size_t stack_bytes);
  // The calling thread's own context (the scheduler side).
  Fiber();
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Suspend `from` (the running context) and resume `to`.
  static void switch_to(Fiber& from, Fiber& to);
  bool finished() const { return finished_; }
  // Run `fn(arg)` from the start again, on the same stack: for a fiber whose body finished or
  // never started (rearmable()); a scheduler reuses its lanes' fibers this way.
  bool rearmable() const { return stack_ && (finished_ || !started_); }
  void rearm(void (*fn)(void*), void* arg);
  size_t stack_bytes() const { return stack_bytes_; }
  // Make this thread's stack pool now: a thread_local made after it, holding fibers, is
  // destroyed before it (and its fibers can give their stacks back).
  static void make_pool();
  // Its stack (null for a thread's own context): tests of the stack pool.
  const char* stack() const { return stack_.get(); }

 private:
  static void entry(Fiber* self);
  void init_frame();
  friend void fiber_trampoline_entry(Fiber* self);

  void* sp_ = nullptr;
  std::unique_ptr<char[]> stack_;
  size_t stack_bytes_ = 0;
  void (*fn_)(void*) = nullptr;
  void* arg_ = nullptr;
  std::function<void()> body_;  // the callable of the second constructor
  bool finished_ = false, started_ = false;
  Fiber* caller_ = nullptr;  // who resumed us last: where to return when the body ends
  // AddressSanitizer bookkeeping.
  void* fake_stack_ = nullptr;
  const void* asan_bottom_ = nullptr;
  size_t asan_size_ = 0;
};

}  // namespace doorbell::gpu_sim
