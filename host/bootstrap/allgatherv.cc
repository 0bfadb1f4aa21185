#include <algorithm>
#include <cstring>

#include "host/bootstrap/bootstrap.h"

namespace doorbell::bootstrap {

Result<std::vector<std::vector<uint8_t>>> allgatherv(Bootstrap& b, const std::vector<uint8_t>& mine) {
  const uint32_t n = b.size(), me = b.rank();
  std::vector<uint64_t> sizes(n);
  sizes[me] = mine.size();
  if (Status s = b.allgather(sizes.data(), sizeof(uint64_t)); !s) return s;
  const uint64_t block = std::max<uint64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
  std::vector<uint8_t> all(n * block);
  if (!mine.empty()) std::memcpy(all.data() + me * block, mine.data(), mine.size());
  if (Status s = b.allgather(all.data(), block); !s) return s;
  std::vector<std::vector<uint8_t>> out(n);
  for (uint32_t r = 0; r < n; ++r) out[r].assign(all.begin() + r * block, all.begin() + r * block + sizes[r]);
  return out;
}

}  // namespace doorbell::bootstrap
