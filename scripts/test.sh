#!/usr/bin/env bash
# Build ferrograd (release, once), install it with the test extras into .venv,
# then run the Rust unit tests and the Python test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q maturin
python -m pip install -q -e ".[test]"
echo "== Rust unit tests (pure-Rust core, release) =="
cargo test --release --no-default-features -q
echo "== Rust unit tests, scalar kernels (FG_CPU=scalar) =="
FG_CPU=scalar cargo test --release --no-default-features -q
echo "== Rust-only graph runner (example binary, for the saved-graph tests) =="
cargo build --release --no-default-features -q --example run_graph
export FG_RUN_GRAPH_BIN="$PWD/target/release/examples/run_graph"
echo "== Python tests (best SIMD level) =="
python -m pytest -n 2 -q "$@"
echo "== Op table with scalar kernels (FG_CPU=scalar) =="
FG_CPU=scalar python -m pytest -n 2 -q --no-optable-matrix tests/test_optable.py
