"""Torch's intra-op threads for a stretch of small operations."""

from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(n: int):
    """Run the block with ``n`` intra-op threads, then give back the caller's count. Small ops on one thread:
    waking and joining a second one cost more than the op on a busy 2-core machine (a 200 x 100 SVD ~1 s of CPU
    time with two threads, ms with one; two 3.4M-float sums 30 ms against 4 ms)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
