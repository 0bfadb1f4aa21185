#include "sim/ibgda/world_pool.h"

namespace doorbell::ibgda {

Result<ModelWorld*> WorldPool::get(const WorldConfig& c) {
  // Only the world get() returned last can have stopped being rewindable (faults injected
  // into it, or built with failover): it was built for its run and goes now.
  if (!worlds_.empty() && !worlds_.front().world->rewindable()) worlds_.pop_front();
  const uint64_t shape = ModelWorld::shape_hash(c);
  for (auto it = worlds_.begin(); it != worlds_.end(); ++it) {
    if (it->shape != shape || !it->world->fits(c)) continue;
    if (Status st = it->world->rewind(c); !st) {  // half put back: build a new one instead
      worlds_.erase(it);
      break;
    }
    worlds_.splice(worlds_.begin(), worlds_, it);
    return worlds_.front().world.get();
  }
  Result<std::unique_ptr<ModelWorld>> w = ModelWorld::create(c);
  if (!w) return w.status();
  ++built_;
  worlds_.push_front({shape, std::move(*w)});
  while (worlds_.size() > capacity_) worlds_.pop_back();
  return worlds_.front().world.get();
}

}  // namespace doorbell::ibgda
