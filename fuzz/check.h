// A fuzz-target oracle failure: print what broke and abort, so libFuzzer saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, ...)                                   \
  do {                                                          \
    if (!(cond)) {                                              \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s: ", #cond);  \
      std::fprintf(stderr, __VA_ARGS__);                        \
      std::fprintf(stderr, "\n");                               \
      std::abort();                                             \
    }                                                           \
  } while (0)
