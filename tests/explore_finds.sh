#!/usr/bin/env bash
# tests/explore_finds.sh DOORBELL SCENARIO [EXPLORE ARGS...] -- PATTERN... [-- PASS ARGS...]
# A planted bug's ctest: `doorbell explore SCENARIO EXPLORE ARGS` must miss (exit 1) with every
# PATTERN (grep basic regex) in its output, which is printed for the log; with PASS ARGS,
# `doorbell explore SCENARIO PASS ARGS` must then meet every expectation (e.g. the SC model).
set -uo pipefail
bin=$1 file=$2
shift 2
args=() patterns=() pass=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
[ $# -gt 0 ] && shift
while [ $# -gt 0 ] && [ "$1" != -- ]; do patterns+=("$1"); shift; done
[ $# -gt 0 ] && { shift; pass=("$@"); }
out=$("$bin" explore "$file" "${args[@]}" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 1 ] || { echo "explore_finds: explore exited $rc, not 1 (a miss)"; exit 1; }
for p in "${patterns[@]}"; do
  grep -q -e "$p" <<< "$out" || { echo "explore_finds: no '$p' in the output"; exit 1; }
done
if [ ${#pass[@]} -gt 0 ]; then
  "$bin" explore "$file" "${pass[@]}" || { echo "explore_finds: explore ${pass[*]} missed"; exit 1; }
fi
exit 0
