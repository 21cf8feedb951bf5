"""The skip-gram kernel at a commit against this checkout's (first: drawing noise words a centre ahead and
prefetching their rows, ``--before c3bb2a5``; then each change of studies/2026-12-02-skipgram-3x.md).

One thread, one subsampled 1M-word chunk of the Wikipedia text repeated to 10M words (V 34k), tables as
after one pass over it: the two kernels' ``_train_part`` over the same part must leave the same tables to
the bit and the same random stream; then each trains the chunk from the same tables, in turn, ``--repeats``
times, timed in CPU seconds of the thread (steadier than wall time on a shared machine).

    python studies/skipgram_prefetch.py --before c3bb2a5 [--repeats 5] [--tokens 400000]

Each kernel gets the noise table in its own form (``compact_noise`` where the module has it).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's zoo and benchmarks/common/

from benchmarks.common.devices import add_device_option, resolve_device  # noqa: E402
from benchmarks.common.skipgram_measures import big_corpus  # noqa: E402
from zoo.models.skipgram import corpus as C  # noqa: E402
from zoo.models.skipgram import kernel  # noqa: E402
from zoo.models.skipgram.sampling import AliasSampler, noise_distribution  # noqa: E402


def kernel_at(commit: str, folder: Path):
    """kernel.py as it was at ``commit``, imported under another name (compiled afresh, not cached)."""
    source = subprocess.run(["git", "show", f"{commit}:zoo/models/skipgram/kernel.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.replace("cache=True", "cache=False")
    path = folder / "kernel_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("kernel_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["kernel_before"] = module  # so that call() finds the module of its functions
    spec.loader.exec_module(module)
    return module


def chunk(work: Path) -> tuple[dict, tuple[np.ndarray, np.ndarray], int]:
    """The first subsampled 1M-word chunk of the 10M-word text, the noise table and the vocabulary size."""
    folder = C.build_corpus([big_corpus(work, 10_000_000)], work / "cache")
    words, counts, meta = C.load_corpus(folder)
    item = next(iter(C.CorpusChunks(folder / "ids.bin", meta["n_ids"], counts, 1_000_000, 5, 1e-3, seed=0)))
    sampler = AliasSampler(noise_distribution(torch.as_tensor(counts)))
    return item, kernel.noise_table(sampler), len(words)


def setup(work: Path, tokens: int):
    """The chunk's (tokens, sentence, reduced) as int64 arrays, its noise table, the vocabulary size, the
    part's length (at most ``tokens``) and the two start tables (syn0 in gensim's initial range, syn1 zero)."""
    item, noise, vocab = chunk(work)
    arrays = tuple(item[k].numpy().astype(np.int64) for k in ("tokens", "sentence", "window"))
    rng = np.random.default_rng(0)
    start0 = ((rng.random((vocab, 100)) - 0.5) / 100).astype(np.float32)  # gensim's initial range
    return arrays, noise, vocab, min(tokens, len(arrays[0])), (start0, np.zeros((vocab, 100), np.float32))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--before", required=True, help="the commit whose kernel.py is compared with this checkout's")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=400_000, help="tokens of the chunk trained per repeat")
    parser.add_argument("--work", default=str(ROOT / "data" / "skipgram_bench"))
    parser.add_argument("--out", default=str(ROOT / "studies" / "results" / "skipgram_prefetch.json"))
    add_device_option(parser)
    args = parser.parse_args()
    device = resolve_device(args.device)
    if device.type != "cpu":
        raise SystemExit(f"--device {device}: the kernel compared here is the CPU's (numba); use --device cpu")
    (tokens, sentence, reduced), (keep, alias), vocab, n, (start0, start1) = setup(Path(args.work), args.tokens)
    work, no_nce = np.empty(100, np.float32), np.empty(0, np.float32)

    def call(fn, syn0, syn1, lo, hi):  # the recipe's settings: k 5, gensim's saturation rule, exact sigmoid index
        module = sys.modules[fn.py_func.__module__]  # its own form of the noise table, where it has one
        table = module.compact_noise(keep, alias) if hasattr(module, "compact_noise") else (keep, alias)
        return fn(tokens, sentence, reduced, lo, hi, syn0, syn1, *table, no_nce, 5, 0.025, 0.02, len(tokens), 7,
                  work, True, 1000, kernel.TABLE_SCALE["exact"],
                  *([1] if "share" in fn.py_func.__code__.co_varnames else []))  # 1: a draw per pair

    with tempfile.TemporaryDirectory() as tmp:
        before = kernel_at(args.before, Path(tmp))
        call(before._train_part, start0, start1, 0, len(tokens))  # tables as after a pass
        kernels = {"before": before._train_part, "now": kernel._train_part}
        ends = {}
        for name, fn in kernels.items():
            syn0, syn1 = start0.copy(), start1.copy()
            result = call(fn, syn0, syn1, 17, n - 5)  # a part that starts and ends inside the chunk
            ends[name] = (syn0, syn1, result)
        (b0, b1, b_result), (n0, n1, n_result) = ends["before"], ends["now"]
        same = bool(np.array_equal(b0, n0) and np.array_equal(b1, n1) and b_result == n_result)
        seconds: dict[str, list[float]] = {name: [] for name in kernels}
        for _ in range(args.repeats):
            for name, fn in kernels.items():  # in turn: both see the same load
                syn0, syn1 = start0.copy(), start1.copy()
                t = time.thread_time()
                call(fn, syn0, syn1, 0, n)
                seconds[name].append(time.thread_time() - t)
    record = {"command": "python " + " ".join(sys.argv), "device": str(device), "before": args.before,
              "vocabulary": vocab, "tokens": n,
              "same_tables_and_stream": same, "cpu_seconds": seconds,
              "before_over_now_min": round(min(seconds["before"]) / min(seconds["now"]), 3),
              "before_over_now_median": round(float(np.median(seconds["before"]) / np.median(seconds["now"])), 3)}
    print(json.dumps({k: v for k, v in record.items() if k != "cpu_seconds"}, indent=1))
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    assert same, "the kernels' tables differ"


if __name__ == "__main__":
    main()
