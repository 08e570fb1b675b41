"""
Ranks that torchrun starts again after one died meet again (test_trainer_distributed.py): on its
first attempt rank 1 dies right after an all-reduce; the next attempt's ranks must join the process
group through the same torchrun store and all-reduce, then print what they summed.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from trajflow_py.trainer.distributed import join_ranks, leave_ranks

ranks = join_ranks()
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
total = torch.ones(1)
dist.all_reduce(total)
# One write per line: both ranks share torchrun's stdout, and print's separate text and newline writes interleave.
os.write(1, f"attempt {attempt} rank {ranks.rank} summed {int(total.item())}\n".encode())
if attempt == "0" and ranks.rank == 1:
    os._exit(9)
if attempt == "0":
    dist.barrier()  # never passes: rank 1 is gone, and torchrun stops this rank
leave_ranks(ranks)
