#!/usr/bin/env bash
# Run the pure-Rust unit tests (storage, layouts and views, kernels' index
# math, the graph executor and the saved-graph loader: the code with `unsafe`
# blocks) under valgrind memcheck. Exit status 1 on any memory error.
#   bash scripts/valgrind.sh            # every unit test
#   bash scripts/valgrind.sh storage    # only tests whose name contains "storage"
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
# Dev profile (opt-level 1, debug info): readable reports, a tolerable slowdown.
BIN="$(cargo test --no-default-features --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test") \
            and "rlib" in t.get("kind", []):
        print(m["executable"])' | tail -1)"
[ -x "$BIN" ] || { echo "could not find the unit-test binary" >&2; exit 2; }
echo "valgrind memcheck on $(basename "$BIN") ${*:-(all tests)}"
# One test thread and one kernel thread: memcheck serialises threads anyway.
RAYON_NUM_THREADS=1 FG_CPU="${FG_CPU:-avx2}" valgrind --tool=memcheck --error-exitcode=1 --leak-check=no \
  --track-origins=no -q "$BIN" --test-threads=1 "$@"
