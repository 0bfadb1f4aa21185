// Fibers: switching preserves state, exceptions unwind inside a fiber, many fibers coexist,
// stacks are reused only at their size.
#include "hw/gpu_sim/fiber.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace doorbell::gpu_sim {
namespace {

TEST(Fiber, PingPongKeepsLocalsAndFloatingPoint) {
  Fiber main;
  std::vector<int> log;
  Fiber* self = nullptr;
  Fiber f(
      [&] {
        double x = 1.5;
        for (int i = 0; i < 3; ++i) {
          log.push_back(i);
          x *= 2;
          Fiber::switch_to(*self, main);
        }
        log.push_back(int(x));
      },
      64 * 1024);
  self = &f;
  for (int i = 0; i < 4; ++i) {
    Fiber::switch_to(main, f);
    log.push_back(100 + i);
  }
  EXPECT_TRUE(f.finished());
  EXPECT_EQ(log, (std::vector<int>{0, 100, 1, 101, 2, 102, 12, 103}));
}

TEST(Fiber, ExceptionsUnwindInsideTheFiber) {
  Fiber main;
  std::string seen;
  Fiber* self = nullptr;
  Fiber f(
      [&] {
        try {
          struct Guard {
            std::string* s;
            ~Guard() { *s += "unwound;"; }
          } g{&seen};
          Fiber::switch_to(*self, main);
          throw std::runtime_error("boom");
        } catch (const std::exception& e) {
          seen += e.what();
        }
      },
      64 * 1024);
  self = &f;
  Fiber::switch_to(main, f);
  EXPECT_EQ(seen, "");
  Fiber::switch_to(main, f);
  EXPECT_EQ(seen, "unwound;boom");
  EXPECT_TRUE(f.finished());
}

// Stacks of finished fibers are kept for the next ones of the same size on this thread, and
// only of the same size: a smaller one would overflow into whatever follows it.
TEST(Fiber, AStackIsReusedOnlyForAFiberOfItsSize) {
  Fiber main;
  const size_t small = 16 * 1024, large = small + 4096;
  const char* kept = nullptr;
  {
    Fiber a([] {}, small);
    Fiber::switch_to(main, a);
    kept = a.stack();
  }
  Fiber b([] {}, large);
  EXPECT_NE(b.stack(), kept);
  EXPECT_GE(malloc_usable_size(const_cast<char*>(b.stack())), large);
  Fiber c([] {}, small);
  EXPECT_EQ(c.stack(), kept);  // the pool gave it back
}

// A fiber whose body finished (or never started) runs a new body from the start on the same
// stack; one suspended mid-body cannot be rearmed (its frames still live there).
TEST(Fiber, ARearmedFiberRunsItsNewBodyFromTheStart) {
  Fiber main;
  Fiber* self = nullptr;
  std::string seen;
  struct Arg {
    std::string* seen;
    Fiber** self;
    Fiber* main;
    const char* tag;
  };
  auto body = [](void* p) {
    auto* a = static_cast<Arg*>(p);
    const double x = 1.5;
    *a->seen += a->tag;
    Fiber::switch_to(**a->self, *a->main);
    *a->seen += std::to_string(x * 2);
  };
  Arg first{&seen, &self, &main, "a"}, second{&seen, &self, &main, "b"};
  Fiber f(body, &first, 16 * 1024);
  self = &f;
  const char* stack = f.stack();
  EXPECT_TRUE(f.rearmable());  // never started
  Fiber::switch_to(main, f);
  EXPECT_FALSE(f.rearmable());  // suspended mid-body
  Fiber::switch_to(main, f);
  ASSERT_TRUE(f.finished());
  ASSERT_TRUE(f.rearmable());
  f.rearm(body, &second);
  EXPECT_FALSE(f.finished());
  EXPECT_EQ(f.stack(), stack);
  Fiber::switch_to(main, f);
  Fiber::switch_to(main, f);
  EXPECT_TRUE(f.finished());
  EXPECT_EQ(seen, "a3.000000b3.000000");
}

}  // namespace
}  // namespace doorbell::gpu_sim
