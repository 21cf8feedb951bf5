"""Refuse weights this machine cannot hold before they are allocated.

Where the kernel grants any allocation (``vm.overcommit_memory=1``, common in containers and VMs; the
GPU machine has it), ``model.hidden=2147483647`` got its 6.7 TB weight matrix, and the process wrote
it while initialising until the kernel killed it, minutes later. Elsewhere the allocator refuses at
once (``zoo.errors.out_of_memory`` words that refusal). Here every tensor a model's constructor asks
for by size is added up, and the request that takes the sum past the machine's memory is a UserError.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from zoo.errors import UserError


def machine_bytes() -> int:
    """Physical memory, or the container's limit (cgroup v2 ``memory.max``) when that is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


@functools.cache
def _size_position(func) -> int | None:
    """Where an op takes its ``size`` argument (factory ops: empty, zeros, randn, ...); None elsewhere."""
    names = [a.name for a in func._schema.arguments]
    return names.index("size") if "size" in names else None


def _requested_bytes(func, args: tuple, kwargs: dict) -> int:
    """Bytes a factory op allocates on the CPU; 0 for every other op and for other devices (meta, a
    GPU: its allocator refuses at once)."""
    index = _size_position(func)
    if index is None:
        return 0
    device = kwargs.get("device") or torch.get_default_device()  # e.g. under `with torch.device("meta")`
    if torch.device(device).type != "cpu":
        return 0
    size = args[index] if index < len(args) else kwargs.get("size", ())
    dtype = kwargs.get("dtype") or torch.get_default_dtype()
    return math.prod(int(n) for n in size) * dtype.itemsize


class AllocationGuard(TorchDispatchMode):
    """Adds up what the block allocates by size; past ``limit`` bytes, a UserError before allocating."""

    def __init__(self, limit: int | None = None):
        super().__init__()
        self.limit = machine_bytes() if limit is None else limit
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        asked = _requested_bytes(func, args, kwargs)
        if asked:
            self.total += asked
            if self.total > self.limit:
                raise UserError(f"out of memory ({self.total / 2**30:.1f} GiB of weights requested, this machine "
                                f"has {self.limit / 2**30:.1f} GiB): lower the sizes or counts asked for "
                                "(hidden sizes, dims, vocabulary) or use a machine with more memory")
        return func(*args, **kwargs)
