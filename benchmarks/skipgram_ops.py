"""Torch operations and host syncs per word on the skip-gram minibatch path (the GPU's), counted
without a GPU. On a GPU every operation is a kernel launch that costs the host microseconds, and every
sync (unique, nonzero, boolean indexing, ``.item()``, ``.tolist()``) holds the host until the queue has
drained; at the recipe's minibatch the GPU then idles (an H100 trained 182k words/s at 5,120 windows,
below gensim on 2 CPU threads: benchmarks/results/gpu_h100_2026-11-25.json). The counts say which
settings can be fast there, and how far: launches per second are bounded, so words per second are at
most about (launches per second) / (operations per word).

    python benchmarks/skipgram_ops.py [--device cpu] [--batches 5120,65536] [--orders in_turn,at_once]
                                      [--caps newton,line,none]

One chunk of gensim's Wikipedia text (as skipgram_vs_gensim.py's ``wiki``; needs gensim) of 16
minibatches' raw words, one thread, each setting on fresh tables. Also prints the chunk's time on
--device (on a GPU: the launch-bound rate). Writes benchmarks/results/skipgram_ops.json.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import add_device_option, describe, processor, resolve_device, synchronize  # noqa: E402
from benchmarks.common.skipgram_measures import wiki_corpus  # noqa: E402

SYNCING = {"nonzero", "_unique2", "unique_dim", "_unique", "unique_consecutive", "_local_scalar_dense",
           "masked_select"}  # ops whose output size or value the host must read


class OpCounter(TorchDispatchMode):
    """Counts every aten operation, those that launch work (views only relabel memory), and those
    that make the host wait for the device."""

    def __init__(self):
        super().__init__()
        self.ops, self.kernels, self.syncs = 0, 0, collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.ops += 1
        self.kernels += not func.is_view
        if name in SYNCING:
            self.syncs[name] += 1
        elif name == "index" and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1]):
            self.syncs["index (boolean)"] += 1  # a boolean index is a nonzero inside the kernel
        return func(*args, **(kwargs or {}))


def chunk_and_model(overrides: list[str], device: torch.device):
    from zoo.config import load_config
    from zoo.train import build

    files = str(wiki_corpus(ROOT / "data" / "skipgram_bench"))
    torch.manual_seed(0)
    datamodule, model = build(load_config("skipgram_lee", [f"data.files={files}", "model.updates=minibatch",
                                                           "model.threads=1", *overrides]))
    batch = next(iter(datamodule.train_dataloader()))
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}, model.to(device)


def one_chunk(batch: dict, model, device: torch.device) -> dict:
    from zoo.models.skipgram.loop import train_chunk

    cfg = model.cfg
    return train_chunk(model.net, batch["tokens"], batch["sentence"], batch["window"], int(model.data_info["window"]),
                       0.025, 0.024, cfg.batch_centres, 0, 1, cfg.share_negatives, 1, 1, cfg.window_pairs,
                       cfg.interleave)


def measure(batch_centres: int, order: str, cap: str, rows: str, device: torch.device) -> dict:
    overrides = [f"model.batch_centres={batch_centres}", f"model.window_pairs={order}",
                 f"data.chunk_tokens={16 * batch_centres}"]  # ~11 minibatches after subsampling
    overrides += ["model.step_cap=false"] if cap == "none" else [f"model.step_cap_method={cap}"]
    batch, model = chunk_and_model(overrides, device)
    model.net.sync_free_rows = rows == "sort"
    words = int(batch["raw_words"])
    minibatches = -(-len(batch["tokens"]) // batch_centres)
    counter, tolist = OpCounter(), [0]
    plain_tolist = torch.Tensor.tolist

    def counted_tolist(self):  # a copy to the host: a sync as well, below the dispatcher
        tolist[0] += 1
        return plain_tolist(self)

    torch.Tensor.tolist = counted_tolist
    try:
        with torch.no_grad(), counter:
            one_chunk(batch, model, device)
    finally:
        torch.Tensor.tolist = plain_tolist
    syncs = sum(counter.syncs.values()) + tolist[0]
    with torch.no_grad():  # timed without the counter, on tables the counted pass already moved
        synchronize(device)
        start = time.perf_counter()
        one_chunk(batch, model, device)
        synchronize(device)
        seconds = time.perf_counter() - start
    row = {"batch_centres": batch_centres, "window_pairs": order, "step_cap": cap, "rows": rows, "raw_words": words,
           "minibatches": minibatches, "ops_per_minibatch": round(counter.ops / minibatches),
           "kernel_ops_per_minibatch": round(counter.kernels / minibatches),
           "kernel_ops_per_1k_words": round(1000 * counter.kernels / words, 1),
           "syncs_per_minibatch": round(syncs / minibatches, 1),
           "syncs_by_kind": {**dict(counter.syncs), "tolist": tolist[0]},
           "ops_per_1k_words": round(1000 * counter.ops / words, 1),
           "syncs_per_1k_words": round(1000 * syncs / words, 2),
           "words_per_s": round(words / seconds)}
    print(f"{batch_centres:>6} {order:8s} {cap:6s}: {row['ops_per_minibatch']:>5} ops ("
          f"{row['kernel_ops_per_minibatch']} not views) and {row['syncs_per_minibatch']:>5} syncs a minibatch, "
          f"{row['kernel_ops_per_1k_words']:>7} non-view ops and "
          f"{row['syncs_per_1k_words']:>6} syncs per 1k words; {row['words_per_s']:,} words/s on {device}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_device_option(parser)
    parser.add_argument("--batches", default="5120,65536", help="model.batch_centres values")
    parser.add_argument("--orders", default="in_turn,at_once", help="model.window_pairs values")
    parser.add_argument("--caps", default="newton,line,none", help="model.step_cap_method values (none: no cap)")
    parser.add_argument("--rows", default="unique", choices=["unique", "sort"],
                        help="the step cap's rows: unique (the default; a host sync each) or sort (none; more ops)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "skipgram_ops.json"))
    args = parser.parse_args()
    device = resolve_device(args.device)
    torch.set_num_threads(1)
    record = {"command": "python " + " ".join(sys.argv), "device": str(device), "device_name": describe(device),
              "machine": processor(),
              "torch": torch.__version__, "corpus": "gensim's Wikipedia text (skipgram_measures.wiki_corpus), "
              "first chunk of skipgram_lee's settings", "rows": []}
    for batch_centres in (int(b) for b in args.batches.split(",")):
        for order in args.orders.split(","):
            for cap in args.caps.split(","):
                record["rows"].append(measure(batch_centres, order, cap, args.rows, device))
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                Path(args.out).write_text(json.dumps(record, indent=1) + "\n")  # as it goes
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
