#include "tools/crash_note.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define DOORBELL_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DOORBELL_SANITIZED 1
#endif
#ifdef DOORBELL_SANITIZED
#include <sanitizer/common_interface_defs.h>
#endif

namespace doorbell::tools {

namespace {

// Written only outside a run's hot path and read by the handler: a fixed buffer and its
// length, nothing a signal handler cannot touch. Per thread: explore runs seeds on several,
// and a crash (a synchronous signal, a sanitizer report) is handled on the thread that
// caused it.
thread_local char g_note[4096];
thread_local volatile sig_atomic_t g_len = 0;

void write_note() {
  const size_t n = size_t(g_len);
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::write(2, g_note + done, n - done);
    if (w <= 0) return;
    done += size_t(w);
  }
}

void on_fatal_signal(int sig) {
  write_note();
  ::signal(sig, SIG_DFL);  // then die of the same signal, core dump and exit status as without us
  ::raise(sig);
}

}  // namespace

void crash_note_install() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
#ifdef DOORBELL_SANITIZED
  // ASan keeps its own SEGV / BUS / FPE handlers (its report is the point) and, like UBSan,
  // exits through its death callback; an abort is still a signal.
  __sanitizer_set_death_callback(write_note);
  ::sigaction(SIGABRT, &sa, nullptr);
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &sa, nullptr);
#endif
}

void crash_note_set(const std::string& text) {
  g_len = 0;
  const size_t n = std::min(text.size(), sizeof g_note);
  std::memcpy(g_note, text.data(), n);
  g_len = sig_atomic_t(n);
}

}  // namespace doorbell::tools
