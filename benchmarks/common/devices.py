"""``--device`` for every benchmark: the option, its check and a timing fence.

    from benchmarks.common.devices import add_device_option, resolve_device, synchronize
"""

from __future__ import annotations

import argparse
import platform

import torch


def add_device_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu",
                        help="where the benchmark runs: cpu (default), cuda, cuda:1, ... (recorded in the JSON)")


def resolve_device(name: str) -> torch.device:
    """The torch device named by --device; exits with a one-line message when it is not available."""
    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise SystemExit(f"--device {name!r}: {e}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {name}: CUDA is not available on this machine (use --device cpu)")
    return device


def accelerator(device: torch.device) -> tuple[str, list[int] | int]:
    """(trainer.accelerator, trainer.devices) for Lightning on ``device``."""
    if device.type == "cuda":
        return "gpu", [device.index or 0]
    return "cpu", 1


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels before reading a clock (CUDA runs asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def describe(device: torch.device) -> str:
    """'cpu' or the GPU's name, for the JSON."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def processor() -> str:
    """The CPU's model name: runs that sample (hard attention, SeqGAN) repeat exactly only on the
    same kind of processor, whose kernels fix the order of float sums."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
