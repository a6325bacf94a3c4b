#!/usr/bin/env bash
# Check the type stubs of the compiled module (python/ferrograd/_core.pyi) against
# the built extension with mypy's stubtest. Needs the dev extra (mypy) installed
# and ferrograd importable (e.g. the .venv from scripts/test.sh, activated).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m mypy.stubtest ferrograd._core --allowlist scripts/stubtest-allowlist.txt
