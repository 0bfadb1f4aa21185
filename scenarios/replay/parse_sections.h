// The sections of a scenario file, one reader each (parse.cc calls them in the file's order):
// the IBGDA workload's (parse_ibgda.cc) and the P2P and NVLS workloads' (parse_p2p_nvls.cc).
// Each reads a node that is present, into its part of the scenario, or throws Bad.
#pragma once

#include <yaml-cpp/yaml.h>

#include "scenarios/replay/scenario.h"

namespace doorbell::scenario {

void parse_stack(const YAML::Node& s, ibgda::Stack& stack);
void parse_planted(const YAML::Node& p, ibgda::Plants& plant);
// workload: dispatch, ctas / warps / lanes, alltoall, ops (pes and memory already read).
void parse_ibgda_workload(const YAML::Node& w, const Scenario& sc, IbgdaWorkload& iw);
void parse_faults(const YAML::Node& f, uint32_t pes, IbgdaWorkload& iw);

P2pWorkload parse_p2p(const YAML::Node& p, const Scenario& sc);
NvlsWorkload parse_nvls(const YAML::Node& v, const Scenario& sc);

}  // namespace doorbell::scenario
