"""``torch.cuda.is_available()`` without a failing NVML probe at every call.

Lightning sets ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` when imported (a CUDA check through NVML does not initialise
CUDA, so forked processes may still use it). Where NVML cannot be loaded or initialised (a CUDA build of torch on a
machine without an NVIDIA driver), torch then tries NVML again at every call, finds nothing and asks the CUDA
runtime, as it does without the variable; torch's Adam and AdamW ask once a step, ~0.1 ms each on this 2-core CPU,
a few per cent of a ~3 ms step (``benchmarks/overhead.py``). There the variable changes nothing but that cost.
"""

from __future__ import annotations

import os

import torch

VARIABLE = "PYTORCH_NVML_BASED_CUDA_CHECK"


def skip_failing_nvml_check() -> bool:
    """Unset ``VARIABLE`` when NVML finds no device count (torch's probe returns < 0: the runtime answers anyway);
    True when it was unset. Left as it is on a machine whose NVML answers, and where torch has no CUDA."""
    probe = getattr(torch.cuda, "_device_count_nvml", None)  # torch's own probe (private: absent, nothing changes)
    if os.environ.get(VARIABLE) != "1" or probe is None or not torch.cuda._is_compiled():
        return False
    if probe() >= 0:
        return False
    del os.environ[VARIABLE]
    return True
