// Worlds kept between runs: a program that runs on a world of a shape seen before takes that
// world rewound (ModelWorld::rewind) instead of building one, which is most of a small run's
// cost (queue_fuzz runs thousands a second). The least recently used world goes first.
#pragma once

#include <cstddef>
#include <list>
#include <memory>

#include "sim/ibgda/model_world.h"

namespace doorbell::ibgda {

class WorldPool {
 public:
  explicit WorldPool(size_t capacity = 32) : capacity_(capacity) {}
  // A world for config `c`, as create() would make it; valid until the next get(). A world
  // that cannot be rewound (failover, faults) is built for its run and dropped at the next.
  Result<ModelWorld*> get(const WorldConfig& c);
  size_t size() const { return worlds_.size(); }
  ModelWorld* newest() const { return worlds_.empty() ? nullptr : worlds_.front().world.get(); }  // what get() returned last
  uint64_t built() const { return built_; }  // worlds created, not rewound

 private:
  size_t capacity_;
  struct Entry {
    uint64_t shape;  // ModelWorld::shape_hash of its config
    std::unique_ptr<ModelWorld> world;
  };
  std::list<Entry> worlds_;  // the most recently used first
  uint64_t built_ = 0;
};

}  // namespace doorbell::ibgda
