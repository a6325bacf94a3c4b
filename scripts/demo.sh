#!/usr/bin/env bash
# Build ferrograd (release), install it with the demo extra (scikit-learn, tqdm,
# matplotlib) into .venv, run the short tour, then the demo: an MLP and a CNN
# trained on scikit-learn's 8x8 digits (examples/digits.py; under a minute on
# 2 cores). Extra arguments go to digits.py, e.g.
#   bash scripts/demo.sh --seed 3 --epochs 20 --out-dir /tmp/run
# Files (checkpoints, loss_curves.png, summary.json) land in demo-output/.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q ".[demo]"
echo "== examples/tour.py =="
python examples/tour.py
echo
echo "== examples/digits.py =="
python examples/digits.py "$@"
