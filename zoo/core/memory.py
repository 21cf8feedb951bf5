"""Refuse weights this machine cannot hold before they are allocated.

Where the kernel grants any allocation (``vm.overcommit_memory=1``, common in containers and VMs; the
GPU machine has it), ``model.hidden=2147483647`` gets its 6.7 TB weight matrix, and the process writes
it while initialising until the kernel kills it, minutes later. Elsewhere the allocator refuses at
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
from torch.utils._pytree import tree_flatten

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


class _NewStorages(TorchDispatchMode):
    """Adds up the bytes of the storages the ops of a block create (outputs that are views of an
    input, or of a storage already counted, add nothing). The counted storages are kept alive until the
    block ends: a freed one whose address the allocator gave again would be taken for a view and left
    out, so the count would depend on what the process had allocated before (one probe 40 % under another)."""

    def __init__(self):
        super().__init__()
        self.bytes, self.seen, self.kept = 0, set(), []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        given = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                ptr = t.untyped_storage().data_ptr()
                if ptr not in given and ptr not in self.seen:
                    self.seen.add(ptr)
                    self.kept.append(t.untyped_storage())
                    self.bytes += t.untyped_storage().nbytes()
        return out


# created_bytes over a step's peak (ru_maxrss; temporaries freed within the pass count too), rounded up from
# the MAML sinusoid's 1.44 (benchmarks/results/maml_step_memory_maml_sinusoid.json). A model whose probe
# overshoots more sets its own ``created_over_peak`` (MAML-RL): a step is refused only when it surely does not fit.
CREATED_OVER_PEAK = 1.45


def created_bytes(fn) -> int:
    """Bytes of the storages ``fn()`` creates (views of its inputs not counted): for a forward pass
    whose graph is kept for backward, a little above the step's peak (``CREATED_OVER_PEAK``). torch's CPU RNG
    is left as it was (MAML-RL's rollouts draw from it): the run measured trains as it would unmeasured."""
    with torch.random.fork_rng(devices=[]), _NewStorages() as counter:
        fn()
    return counter.bytes


def check_step_fits(model, datamodule, accelerator: str) -> None:
    """A model whose training step grows with an unbounded option (MAML's tasks per meta-batch) says
    how much memory one step needs (``step_bytes(datamodule) -> (bytes, what to lower)``); past the
    machine's memory that is a UserError before the run starts. On the CPU only: there the kernel
    kills the process minutes into its first step (no message, a half-made run folder); a GPU's
    allocator refuses at once, which ``zoo.errors.out_of_memory`` words."""
    estimate = getattr(model, "step_bytes", None)
    if estimate is None or not (accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())):
        return
    created, lower = estimate(datamodule)
    need, have = created / getattr(model, "created_over_peak", CREATED_OVER_PEAK), machine_bytes()
    if need > have:
        raise UserError(f"out of memory: one training step needs about {need / 2**30:.1f} GiB, this machine has "
                        f"{have / 2**30:.1f} GiB: lower {lower}")
