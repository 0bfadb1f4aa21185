#!/usr/bin/env bash
# ctest check_layers_finds_a_planted_upward_include: copies the tree's sources, plants one
# include of each forbidden kind (the model including sim/, the model including a protocol
# header, core/ including <thread>), and checks that ci/check-layers fails naming each line,
# while the unplanted copy passes.
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$src" && git ls-files -- '*.h' '*.cc' '*.cu' '*.cuh' '*.cpp' | tar -cf - -T -) | (cd "$tmp" && tar -xf -)
cp "$src/ci/check-layers" "$tmp/check-layers"
run() { (cd "$tmp" && GIT_DIR=/nonexistent bash ./check-layers "$tmp"); }
if ! out=$(run 2>&1); then echo "the unplanted copy fails:"; echo "$out"; exit 1; fi
sed -i '0,/#include/s|#include|#include "sim/ibgda/model_world.h"\n#include|' "$tmp/hw/mock_nic/nic.h"
sed -i '0,/#include/s|#include|#include "core/ibgda/queue.h"\n#include|' "$tmp/hw/gpu_sim/scheduler.h"
sed -i '0,/#include/s|#include|#include <thread>\n#include|' "$tmp/core/ibgda/queue.h"
if out=$(run 2>&1); then echo "ci/check-layers passed a tree with three upward includes"; exit 1; fi
echo "$out"
for want in 'hw/mock_nic/nic.h:[0-9]*: #include "sim/ibgda/model_world.h": layer 2 includes layer 4' \
            'hw/gpu_sim/scheduler.h:[0-9]*: #include "core/ibgda/queue.h": the model includes a protocol header' \
            'core/ibgda/queue.h:[0-9]*: #include <thread>'; do
  grep -q "$want" <<<"$out" || { echo "missing: $want"; exit 1; }
done
echo "planted upward includes found"
