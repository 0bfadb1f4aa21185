#include "sim/ibgda/world_pool.h"

namespace doorbell::ibgda {

Result<ModelWorld*> WorldPool::get(const WorldConfig& c) {
  for (auto it = worlds_.begin(); it != worlds_.end();) {
    if (!(*it)->rewindable()) {
      it = worlds_.erase(it);
      continue;
    }
    if ((*it)->fits(c)) {
      if (Status st = (*it)->rewind(c); !st) {  // half put back: build a new one instead
        worlds_.erase(it);
        break;
      }
      worlds_.splice(worlds_.begin(), worlds_, it);
      return worlds_.front().get();
    }
    ++it;
  }
  Result<std::unique_ptr<ModelWorld>> w = ModelWorld::create(c);
  if (!w) return w.status();
  ++built_;
  worlds_.push_front(std::move(*w));
  while (worlds_.size() > capacity_) worlds_.pop_back();
  return worlds_.front().get();
}

}  // namespace doorbell::ibgda
