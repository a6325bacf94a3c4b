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
echo "== Python tests (best SIMD level) =="
python -m pytest -n 2 -q "$@"
