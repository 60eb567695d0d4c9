"""Data-parallel multi-process setup through ``torch.distributed``, as rsl_rl does it.

Processes are started by ``torchrun`` (or any launcher that sets ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``). Backend: gloo for CPU devices, NCCL for CUDA (device must be ``cuda:<LOCAL_RANK>``).
Every process runs its own envs; gradients are averaged with all-reduce and parameters broadcast from rank 0 at
the start of :meth:`~diffloco_ext.learning.runner.SHACRunner.learn`. Seed each rank differently (e.g. seed + rank).
"""

from __future__ import annotations

import os

import torch


def configure_distributed(device: str) -> dict | None:
    """Initialise the process group if ``WORLD_SIZE > 1``.

    Returns ``{"global_rank", "local_rank", "world_size"}`` (rsl_rl's ``multi_gpu`` config) or None for one process.
    """
    world_size = int(os.getenv("WORLD_SIZE", "1"))
    if world_size <= 1:
        return None
    local_rank = int(os.getenv("LOCAL_RANK", "0"))
    global_rank = int(os.getenv("RANK", "0"))
    if not (0 <= local_rank < world_size and 0 <= global_rank < world_size):
        raise ValueError(f"Invalid ranks: RANK={global_rank}, LOCAL_RANK={local_rank}, WORLD_SIZE={world_size}.")
    if torch.device(device).type == "cuda":
        if device != f"cuda:{local_rank}":
            raise ValueError(f"Device '{device}' does not match expected device 'cuda:{local_rank}' "
                             f"for the local rank.")
        backend = "nccl"
        torch.cuda.set_device(local_rank)
    else:
        backend = "gloo"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend=backend, rank=global_rank, world_size=world_size)
    return {"global_rank": global_rank, "local_rank": local_rank, "world_size": world_size}
