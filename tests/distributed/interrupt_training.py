"""Trains a tiny DDP model until interrupted; tests/test_distributed.py sends SIGINT (Ctrl-C).

Each rank writes ``rank<R>.pid`` into the directory given as the first argument once training runs.
Without an interrupt it stops after 60 s and prints "trained until the time limit".
"""

import os
import sys
import time
from pathlib import Path

import ferrograd as fg
import ferrograd.distributed as dist
import ferrograd.nn as nn
import ferrograd.nn.functional as F

dist.init_process_group()
rank = dist.get_rank()
fg.manual_seed(0)
ddp = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
opt = fg.optim.SGD(ddp.parameters(), lr=0.01)
x, y = fg.randn(16, 32), fg.randint(0, 4, (16,))
start = time.monotonic()
step = 0
while time.monotonic() - start < 60:
    opt.zero_grad()
    F.cross_entropy(ddp(x), y).backward()
    opt.step()
    step += 1
    if step == 5:
        (Path(sys.argv[1]) / f"rank{rank}.pid").write_text(str(os.getpid()))
print(f"rank {rank} trained until the time limit", flush=True)
