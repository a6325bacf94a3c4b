#!/usr/bin/env bash
# Build ferrograd once (release, one abi3 wheel), install that wheel (not
# editable) with the test and demo extras into .venv (the demo extra lets the
# digits examples run as tests), then: the type-stub check, the Rust unit tests
# (with debug assertions and overflow checks, at the best SIMD level and with scalar kernels), the
# Python test suite against the installed package (also with every eligible
# elementwise result deferred), the op table again with scalar kernels (and with
# AVX2 kernels on an AVX-512 host), and a smoke test of the wheel alone in a
# fresh virtual environment outside the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
# A section header with the minutes spent so far, for the CI budget.
section() { printf "== %s == (at %dm%02ds)\n" "$1" $((SECONDS / 60)) $((SECONDS % 60)); }
export CARGO_INCREMENTAL=0
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q maturin
section "Build the wheel (release, abi3)"
rm -rf dist
maturin build --release -q --out dist
WHEEL="$(ls dist/ferrograd-*.whl)"
echo "built $(basename "$WHEEL")"
# One portable wheel: the stable ABI (abi3) and a manylinux platform tag.
case "$(uname -s)-$(basename "$WHEEL")" in
  Linux-*-abi3-manylinux*) ;;
  Linux-*) echo "expected an abi3 manylinux wheel, got $(basename "$WHEEL")" >&2; exit 1 ;;
esac
python -m pip install -q --force-reinstall --no-deps "$WHEEL"
# mpi: the distributed tests launch `mpiexec -n 2` (from the mpich wheel, in the venv's bin).
python -m pip install -q "$WHEEL[test,demo,mpi]" mypy
# First the checks that take seconds, so that a stub out of step fails at once.
section "Type stubs against the built module (mypy stubtest)"
bash scripts/stubtest.sh
# The Rust core is compiled once for all of its checks: without Python, with the
# WebGPU backend (WGSL validated with naga), and with debug assertions and
# overflow checks on in the ferrograd crate (its dependencies build as usual).
# `cargo test` also builds the examples, so the graph runner below is free.
RUST_CFG=(--release --no-default-features --features gpu
  --config 'profile.release.package.ferrograd.debug-assertions=true'
  --config 'profile.release.package.ferrograd.overflow-checks=true')
section "Rust unit tests (best SIMD level; debug assertions and overflow checks on)"
# The shader tests also write every WGSL module they validate, for the browser's
# compiler in tests/test_webgpu_browser.py.
export FG_WGSL_CATALOG="$PWD/target/wgsl-catalog"
rm -rf "$FG_WGSL_CATALOG" && mkdir -p "$FG_WGSL_CATALOG"
FG_WGSL_DUMP="$FG_WGSL_CATALOG" cargo test "${RUST_CFG[@]}" -q
section "Rust unit tests, scalar kernels (FG_CPU=scalar)"
FG_CPU=scalar cargo test "${RUST_CFG[@]}" -q
section "Rust-only graph runner (example binary, for the saved-graph tests)"
cargo build "${RUST_CFG[@]}" -q --example run_graph
export FG_RUN_GRAPH_BIN="$PWD/target/release/examples/run_graph"
section "Python tests (best SIMD level, the installed wheel)"
python -m pytest -n 2 -q "$@"
section "Python tests with every eligible elementwise result deferred (FG_DEFER_MIN=1)"
FG_DEFER_MIN=1 python -m pytest -n 2 -q --no-optable-matrix tests
section "Op table with scalar kernels (FG_CPU=scalar)"
FG_CPU=scalar python -m pytest -n 2 -q --no-optable-matrix tests/test_optable.py
# Where the default level is AVX-512 the AVX2 kernels ran nowhere above (about 1.5 min on 2 cores).
if [ "$(python -c 'import ferrograd as fg; print(fg.cpu_level())')" = avx512 ]; then
  section "Op table with AVX2 kernels (FG_CPU=avx2; this host's default is AVX-512)"
  FG_CPU=avx2 python -m pytest -n 2 -q --no-optable-matrix tests/test_optable.py
fi
section "The wheel alone in a fresh virtual environment"
SMOKE="$(mktemp -d)"
python3 -m venv "$SMOKE/venv"
"$SMOKE/venv/bin/python" -m pip install -q "$WHEEL"
(cd "$SMOKE" && "$SMOKE/venv/bin/python" "$OLDPWD/scripts/smoke.py")
rm -rf "$SMOKE"
section "done"
