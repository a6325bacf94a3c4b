#!/usr/bin/env bash
# Build ferrograd (release), install it into .venv, and run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q ".[demo]"
python examples/tour.py
