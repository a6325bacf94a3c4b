"""Rank 1 raises while rank 0 waits in a collective: the job must end at once, rank 1's traceback printed."""

import ferrograd as fg
import ferrograd.distributed as dist

dist.init_process_group()
if dist.get_rank() == 1:
    raise ValueError("boom on rank one")
dist.all_reduce(fg.ones(4))  # never completes: rank 1 is gone
print("rank 0 should not get here", flush=True)
