"""
The trainer's processes (ranks) on torch.distributed, as `torchrun` starts them
(`trainer.distributed`): NCCL between GPUs, gloo on CPUs. One process alone (no WORLD_SIZE in its
environment, or 1) needs no process group, and every collective below is then the identity.

Rank 0 is the leader: it alone polls Temporal and touches the store; it sends every other rank
(a follower) each command it runs itself (load, train, save), with the same arguments, so that all
ranks enter the same collectives in the same order (see `follow`).

The model is sharded with FSDP2 (`fully_shard`, one unit per decoder layer and one for the rest):
each rank keeps a 1/N slice of the float32 parameters, gradients and AdamW state, gathers a layer's
full weights just before it runs and frees them after. FSDP averages the ranks' gradients; the
loss weighs each rank's sequences by their share of the whole minibatch, so the trainer scales its
backward pass by the number of ranks (`Ranks.world`) to make that average the minibatch's gradient.
(FSDP's own divide factor takes a reduction gloo lacks.)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch._C._distributed_c10d import PrefixStore, Store, TCPStore
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

#: A collective that waits longer than this for a peer fails (the peer is taken for dead).
COLLECTIVE_TIMEOUT = timedelta(minutes=30)


@dataclass(frozen=True)
class Ranks:
    """This process's place among the trainer's processes."""

    rank: int = 0
    world: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def leader(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    def sum(self, values: list[float]) -> list[float]:
        """Each value summed over every rank."""
        if not self.distributed:
            return values
        total = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(total)
        return total.tolist()

    def broadcast(self, value: Any = None) -> Any:
        """The leader's `value`, on every rank (the followers' argument is ignored)."""
        if not self.distributed:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0, device=self.device)
        return box[0]

    def gather(self, value: Any) -> list[Any]:
        """Every rank's `value`, in rank order, on every rank."""
        if not self.distributed:
            return [value]
        values: list[Any] = [None] * self.world
        dist.all_gather_object(values, value)
        return values


def device_of_rank(local_rank: int) -> torch.device:
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


def join_ranks() -> Ranks:
    """
    This process's Ranks, from the variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR, MASTER_PORT); the process group is joined when there are several ranks.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = device_of_rank(local_rank)
    if world == 1:
        return Ranks(0, 1, device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    rank = int(os.environ["RANK"])
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend, store=attempt_store(rank, world), rank=rank, world_size=world, timeout=COLLECTIVE_TIMEOUT)
    return Ranks(dist.get_rank(), dist.get_world_size(), device)


def attempt_store(rank: int, world: int) -> Store:
    """
    The key-value store the ranks meet through, under a prefix of torchrun's restart count: torchrun
    keeps one store for every restart of the ranks, and the addresses the ranks of an earlier attempt
    wrote there (dead processes' ports) must not be read by the next attempt's.
    """
    # torchrun's agent hosts the store when it says so; otherwise rank 0 does.
    agent_hosts = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=not agent_hosts and rank == 0, timeout=COLLECTIVE_TIMEOUT)
    return PrefixStore(f"trajflow/attempt-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)


def leave_ranks(ranks: Ranks) -> None:
    """Leaves the process group once every rank is leaving (one that tears it down while a peer still talks to it aborts)."""
    if ranks.distributed and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's repeated blocks, by the class names a Hugging Face model lists as never to be split."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    return [module for module in model.modules() if type(module).__name__ in names]


def shard(model: torch.nn.Module, ranks: Ranks) -> None:
    """FSDP2 over all ranks: one unit per decoder layer, then the root (embeddings, norm, head)."""
    mesh = init_device_mesh(ranks.device.type, (ranks.world,))
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)


def local_part(tensor: Tensor) -> Tensor:
    """A sharded (DTensor) tensor's slice held by this rank; a plain tensor as it is."""
    to_local: Callable[[], Tensor] | None = getattr(tensor, "to_local", None)
    return to_local() if to_local is not None else tensor
