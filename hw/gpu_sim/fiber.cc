#include "hw/gpu_sim/fiber.h"

#include <cstdint>
#include <cstdio>
#include <exception>
#include <cstdlib>
#include <utility>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DOORBELL_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DOORBELL_ASAN 1
#endif
#if DOORBELL_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "gpu_sim fibers: only the x86-64 context switch is written so far"
#endif

// doorbell_fiber_switch(void** save_sp, void* load_sp): push callee-saved registers and the
// SSE/x87 control words, save rsp, load the other rsp, pop the same, return into it.
// doorbell_fiber_start: first return of a new fiber lands here; r12 holds the Fiber*.
asm(R"(
  .text
  .globl doorbell_fiber_switch
  .type doorbell_fiber_switch,@function
doorbell_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size doorbell_fiber_switch,.-doorbell_fiber_switch

  .globl doorbell_fiber_start
  .type doorbell_fiber_start,@function
doorbell_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  call doorbell_fiber_entry_c
  ud2
  .cfi_endproc
  .size doorbell_fiber_start,.-doorbell_fiber_start
)");

extern "C" void doorbell_fiber_switch(void** save_sp, void* load_sp);
extern "C" void doorbell_fiber_start();

namespace doorbell::gpu_sim {

// Not instrumented: entry never returns, and ASan would call __asan_handle_no_return (a
// sigaltstack system call) before it on every fiber start. The new stack is clean already.
__attribute__((no_sanitize("address"))) void fiber_trampoline_entry(Fiber* self) { Fiber::entry(self); }

}  // namespace doorbell::gpu_sim

extern "C" __attribute__((no_sanitize("address"))) void doorbell_fiber_entry_c(doorbell::gpu_sim::Fiber* self) {
  doorbell::gpu_sim::fiber_trampoline_entry(self);
}

namespace doorbell::gpu_sim {

namespace {

// Stacks of finished schedulers, kept for the next ones on this thread: a run builds a fiber
// per lane and agent, and a fresh stack is a large allocation (512 KiB under ASan) whose
// pages fault in again on every run of a fuzz target or an explore seed.
class StackPool {
 public:
  std::unique_ptr<char[]> take(size_t bytes) {
    for (auto& [size, free] : sizes_)
      if (size == bytes && !free.empty()) {
        std::unique_ptr<char[]> s = std::move(free.back());
        free.pop_back();
        return s;
      }
    return std::unique_ptr<char[]>(new char[bytes]);
  }
  void give(std::unique_ptr<char[]> s, size_t bytes) {
#if DOORBELL_ASAN
    // A fiber abandoned mid-body leaves its frames' redzones poisoned.
    ASAN_UNPOISON_MEMORY_REGION(s.get(), bytes);
#endif
    for (auto& [size, free] : sizes_)
      if (size == bytes) {
        if (free.size() < kKeep) free.push_back(std::move(s));
        return;
      }
    sizes_.emplace_back(bytes, std::vector<std::unique_ptr<char[]>>{}).second.push_back(std::move(s));
  }

 private:
  static constexpr size_t kKeep = 256;  // per size: the fibers of a typical run, not of the largest
  std::vector<std::pair<size_t, std::vector<std::unique_ptr<char[]>>>> sizes_;
};

StackPool& stack_pool() {
  thread_local StackPool pool;  // explore's jobs run schedulers on several threads
  return pool;
}

}  // namespace

Fiber::Fiber() = default;

void Fiber::make_pool() { stack_pool(); }

Fiber::Fiber(std::function<void()> body, size_t stack_bytes)
    : Fiber([](void* self) { static_cast<Fiber*>(self)->body_(); }, this, stack_bytes) {
  body_ = std::move(body);
}

Fiber::Fiber(void (*fn)(void*), void* arg, size_t stack_bytes)
    : stack_(stack_pool().take(stack_bytes)), stack_bytes_(stack_bytes), fn_(fn), arg_(arg) {
  init_frame();
}

// Initial frame, as doorbell_fiber_switch expects to pop it: control words, r15..rbp, then
// the return address. After the pops rsp is 16-byte aligned, as a call site needs.
void Fiber::init_frame() {
  auto top = (reinterpret_cast<uintptr_t>(stack_.get()) + stack_bytes_) & ~uintptr_t(15);
  auto* frame = reinterpret_cast<uint64_t*>(top - 80);
  frame[0] = 0x037f'0000'1f80ull;  // mxcsr = 0x1f80 (low), x87 control word = 0x037f (high)
  frame[1] = 0;                     // r15
  frame[2] = 0;                     // r14
  frame[3] = 0;                     // r13
  frame[4] = reinterpret_cast<uint64_t>(this);  // r12: argument for the entry
  frame[5] = 0;                     // rbx
  frame[6] = 0;                     // rbp
  frame[7] = reinterpret_cast<uint64_t>(&doorbell_fiber_start);
  sp_ = frame;
}

void Fiber::rearm(void (*fn)(void*), void* arg) {
  if (!rearmable()) std::abort();  // frames of a body that did not finish still live on the stack
#if DOORBELL_ASAN
  // The finished body's last frames (this file's, which never returned) left redzones poisoned.
  ASAN_UNPOISON_MEMORY_REGION(stack_.get(), stack_bytes_);
#endif
  fn_ = fn, arg_ = arg;
  body_ = nullptr;
  finished_ = started_ = false;
  caller_ = nullptr;
  fake_stack_ = nullptr, asan_bottom_ = nullptr, asan_size_ = 0;
  init_frame();
}

Fiber::~Fiber() {
  if (stack_) stack_pool().give(std::move(stack_), stack_bytes_);
}

void Fiber::switch_to(Fiber& from, Fiber& to) {
  if (!to.finished_ && to.stack_) to.caller_ = &from;
#if DOORBELL_ASAN
  __sanitizer_start_switch_fiber(from.finished_ ? nullptr : &from.fake_stack_, to.asan_bottom_ ? to.asan_bottom_ : to.stack_.get(),
                                 to.asan_bottom_ ? to.asan_size_ : to.stack_bytes_);
#endif
  doorbell_fiber_switch(&from.sp_, to.sp_);
#if DOORBELL_ASAN
  // Back in `from`: learn the bounds of the stack we came from (the scheduler's, once).
  const void* bottom;
  size_t size;
  __sanitizer_finish_switch_fiber(from.fake_stack_, &bottom, &size);
  if (to.stack_ == nullptr) to.asan_bottom_ = bottom, to.asan_size_ = size;
#endif
}

void Fiber::entry(Fiber* self) {
#if DOORBELL_ASAN
  const void* bottom;
  size_t size;
  __sanitizer_finish_switch_fiber(nullptr, &bottom, &size);
  if (self->caller_ && self->caller_->stack_ == nullptr) self->caller_->asan_bottom_ = bottom, self->caller_->asan_size_ = size;
#endif
  self->started_ = true;
  try {
    self->fn_(self->arg_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "doorbell: uncaught exception escaped a fiber body: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "doorbell: uncaught exception escaped a fiber body\n");
    std::abort();
  }
  self->finished_ = true;
  switch_to(*self, *self->caller_);
  std::abort();  // a finished fiber is never resumed
}

}  // namespace doorbell::gpu_sim
