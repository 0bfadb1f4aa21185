// DOORBELL_SHIM_TRACE=file.json: a Chrome / Perfetto timeline of the client's queues as the
// engine thread sees them — each doorbell (QP, doorbell record), per QP its doorbell record,
// what the engine fetched and the WQEs it executed, per CQ the CQEs written and the client's
// consumer index — sampled whenever something moved, written at exit.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/mock_nic/nic.h"

namespace doorbell::shim {

class Timeline {
 public:
  Timeline(std::string path, uint32_t rank) : path_(std::move(path)), rank_(rank) {}
  // What changed since the last sample, at `ts_us` from the model's start (model mutex held).
  void sample(const mock_nic::Nic& nic, const std::vector<uint32_t>& qpns, double ts_us);
  // Writes the file; false and *why if it cannot.
  bool write(std::string* why) const;

 private:
  struct QpSeen {
    uint64_t doorbells = 0, dbr = ~0ull, head = ~0ull, wqes = ~0ull;
  };
  std::string path_;
  uint32_t rank_;
  std::map<uint32_t, QpSeen> qps_;
  std::map<uint32_t, std::pair<uint64_t, uint32_t>> cqs_;  // cqn -> (CQEs, consumer index)
  std::vector<nlohmann::ordered_json> events_;
};

}  // namespace doorbell::shim
