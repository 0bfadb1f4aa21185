// A spin-wait's pause: keeps a polling thread on its core (a yield can cost a whole scheduler
// tick when another thread wants the core) without hammering the memory system.
#pragma once

namespace doorbell {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace doorbell
