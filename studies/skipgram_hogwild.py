"""Where the 2-thread gap to gensim comes from: the two threads' order of updates, or their races.

The zoo's sequential kernel with 2 Hogwild threads lands a little further from gensim (2 workers) than
gensim's own seeds land from each other, and one thread each closes the gap (docs/skipgram.md, "The
50M-word gap"). Two threads change two things at once: the order of the updates (two jobs of the
text advance side by side) and the memory (two cores read and write shared rows without locks, so
an update may be lost or computed from a stale row). This separates them. Per seed, on one corpus:

- ``threads1``: one thread, the whole chunk in order;
- ``threads2``: two Hogwild threads taking turns on jobs (the recipes' setting);
- ``serial2``: the same jobs, the same noise words (each job's own random stream, as ``threads2``)
  and the same side-by-side order, run on ONE core: a centre word of thread 0's job, then one of
  thread 1's, and so on. The order of ``threads2`` without its races.

and gensim with 2 workers (and 1 with ``--gensim-workers 1,2``). If ``serial2`` sits with
``threads2``, the order explains the gap; if it sits with ``threads1``, the races do. Reported per
variant: neighbour agreement with gensim (same seed), with the other variants (same seed), and the
mean vector length by frequency band (the signature the 50M-word runs showed: two threads shorten the
rarer words' vectors).

    python studies/skipgram_hogwild.py --corpus wiki --seeds 0 1 2 --out studies/results/skipgram_hogwild.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))  # skipgram_vs_gensim.py
from skipgram_vs_gensim import ROOT, loop_quality, run_gensim, run_zoo, similarity_files  # noqa: E402

from benchmarks.common.devices import add_device_option, processor, resolve_device  # noqa: E402
from benchmarks.common.skipgram_measures import (  # noqa: E402
    agreement_between_processes,
    big_corpus,
    lee_corpus,
    neighbour_agreement,
    objective_probe,
    wiki_corpus,
)
from zoo.models.skipgram import kernel  # noqa: E402
from zoo.spread import median_range  # noqa: E402

LOSS_PAIRS = kernel.LOSS_PAIRS
_train_part = kernel._train_part  # a global of this module, so that numba compiles the call below


def _serial_chunk(tokens, sentence, reduced, bounds, threads, syn0, syn1, keep, alias, log_kq, negative, lr0, lr1,
                  seed, skip_saturated, table_scale):
    """kernel._train_chunk's jobs and random streams, the threads' turns taken one centre word at a time
    on one core (compiled below; same arguments and result)."""
    jobs = bounds.shape[0] - 1
    n_total = tokens.shape[0]
    work = np.empty(syn0.shape[1], dtype=syn0.dtype)
    job = np.arange(threads)  # the job each emulated thread is on
    pos = bounds[:threads].copy()  # its next centre word
    rng = np.empty(threads, dtype=np.uint64)
    for t in range(threads):
        rng[t] = np.uint64(seed + 7919 * (t + 1))
    losses = np.zeros(threads)
    counted = np.zeros(threads, dtype=np.int64)
    pairs = 0
    active = threads
    while active > 0:
        active = 0
        for t in range(threads):
            j = job[t]
            if j >= jobs:
                continue
            active += 1
            first_job = j == t
            budget = LOSS_PAIRS - counted[t] if first_job and counted[t] < LOSS_PAIRS else 0
            loss, p, state = _train_part(tokens, sentence, reduced, pos[t], pos[t] + 1, syn0, syn1, keep, alias,
                                         log_kq, negative, lr0, lr1, n_total, rng[t], work, skip_saturated,
                                         budget, table_scale, 1)
            rng[t] = state
            if budget > 0:
                losses[t] += loss
                counted[t] += min(p, budget)
            pairs += p
            pos[t] += 1
            if pos[t] == bounds[j + 1]:  # the next job of this thread, with that job's own stream
                job[t] = j + threads
                if job[t] < jobs:
                    pos[t] = bounds[job[t]]
                    rng[t] = np.uint64(seed + 7919 * (job[t] + 1))
    return losses.sum() / max(1, counted.sum()), pairs


def line_bounds(sentence: np.ndarray, limit: int, threads: int) -> np.ndarray:
    """Job bounds as gensim's job producer draws them: whole sentences (lines) gathered while the job
    holds at most ``limit`` tokens; a longer sentence is a job of its own (gensim's sentences are cut
    at 10,000 words already). sentence: (N,) sentence number of every kept token, non-decreasing."""
    starts = np.flatnonzero(np.r_[True, sentence[1:] != sentence[:-1]])  # first token of every sentence
    ends = np.r_[starts[1:], len(sentence)]
    bounds, size = [0], 0
    for a, b in zip(starts.tolist(), ends.tolist()):
        if size and size + (b - a) > limit:
            bounds.append(a)
            size = 0
        size += b - a
    bounds.append(len(sentence))
    while len(bounds) - 1 < threads:  # a chunk of one long sentence: cut it evenly
        bounds = np.linspace(0, len(sentence), threads + 1).round().astype(np.int64).tolist()
    return np.asarray(bounds, dtype=np.int64)


def with_line_jobs(chunk_fn, limit: int):
    """``chunk_fn`` (the kernel's ``_train_chunk`` signature) with its job bounds redrawn by ``line_bounds``."""
    def run(tokens, sentence, reduced, bounds, threads, *rest):
        return chunk_fn(tokens, sentence, reduced, line_bounds(sentence, limit, threads), threads, *rest)
    return run


def warps(name: str):
    """``kernel._train_chunk``'s signature, run as the GPU kernel's jobs stepped together on one core
    (skipgram_lockstep.py): ``warpsJ`` J contiguous jobs (gpu_kernel.job_bounds: at most one a 16 tokens),
    ``warpsJbS`` J jobs taking blocks of S tokens in turn; a final ``a`` (``warpsJa``): additive writes; a final
    ``s``: every step lands at once (the jobs' order without stale reads)."""
    from benchmarks.common.skipgram_lockstep import lockstep_chunk
    from zoo.models.skipgram.gpu_kernel import job_bounds

    additive = name.endswith("a")  # warpsJa: the writes add their steps (atomic adds)
    immediate = name.endswith("s")  # warpsJs: no stale reads
    jobs, _, block = name[len("warps"):].rstrip("as").partition("b")

    def run(tokens, sentence, reduced, bounds, threads, *rest):  # the GPU kernel's jobs, not the threads' bounds
        ours = job_bounds(len(tokens), int(jobs), torch.device("cpu")).numpy()
        return lockstep_chunk(tokens, sentence, reduced, ours, *rest, int(block or 0), additive, immediate)
    return run


def main() -> None:
    from numba import njit

    from zoo.tracking import quiet_lightning

    quiet_lightning()
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--corpus", default="wiki", help="lee, wiki, wiki10m (the Wikipedia text x22, 10M words)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--gensim-workers", default="2", help="gensim's thread counts, e.g. 2 or 1,2")
    parser.add_argument("--chunk-tokens", type=int, default=250_000)
    parser.add_argument("--variants", default="threads1,threads2,serial2",
                        help="zoo variants: threads1, threads2, serial2, threads2_lines / serial2_lines (jobs "
                             "of whole lines, as gensim's producer makes them), and warpsJ: the GPU kernel's J "
                             "jobs at once, modelled on one core (skipgram_lockstep.py); warpsJbS: J jobs taking "
                             "blocks of S tokens in turn; a final a: additive writes, s: no stale reads")
    parser.add_argument("--line-job-tokens", type=int, default=7530,
                        help="the _lines variants' job limit in kept tokens: gensim's 10,000 words a job times the "
                             "share subsampling keeps (0.753 on the Wikipedia text)")
    parser.add_argument("--work", default=str(ROOT / "data" / "skipgram_bench"))
    parser.add_argument("--out", default=str(ROOT / "studies" / "results" / "skipgram_hogwild.json"))
    add_device_option(parser)
    args = parser.parse_args()
    device = resolve_device(args.device)
    if device.type != "cpu":  # the sequential kernel (numba) and gensim run on the CPU only
        raise SystemExit(f"--device {args.device}: this benchmark compares CPU kernels; use --device cpu")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    path = {"lee": lambda: lee_corpus(work), "wiki": lambda: wiki_corpus(work),
            "wiki10m": lambda: big_corpus(work, 10_000_000)}[args.corpus]()
    wordsim, simlex, analogies = similarity_files()
    probe = objective_probe(path)
    serial = njit(cache=False)(_serial_chunk)
    threaded = kernel._train_chunk
    workers = [int(w) for w in args.gensim_workers.split(",")]
    variants = [*args.variants.split(","), *[f"gensim{w}" for w in workers]]
    kernels = {"threads1": threaded, "threads2": threaded, "serial2": serial,
               "threads2_lines": with_line_jobs(threaded, args.line_job_tokens),
               "serial2_lines": with_line_jobs(serial, args.line_job_tokens)}
    kernels.update({v: warps(v) for v in args.variants.split(",") if v.startswith("warps")})
    runs: dict[str, list] = {v: [] for v in variants}
    vectors: dict[str, list] = {v: [] for v in variants}
    for seed in args.seeds:
        for v in variants:  # alternate, so that every variant sees the same machine load
            start = time.perf_counter()
            if v.startswith("gensim"):
                stats, vec, words = run_gensim(path, args.epochs, seed, int(v[len("gensim"):]))
            else:
                kernel._train_chunk = kernels[v]
                threads = 1 if v == "threads1" or v.startswith("warps") else 2
                try:
                    stats, vec, words = run_zoo(path, args.epochs, seed, threads,
                                                work / "cache", {}, torch.device("cpu"), args.chunk_tokens)
                finally:
                    kernel._train_chunk = threaded
            stats = loop_quality(stats, vec, words, [wordsim, simlex], [analogies], probe)  # with mean_norm
            stats["wall_s"] = round(time.perf_counter() - start, 1)
            runs[v].append(stats)
            vectors[v].append((vec, words))
            print(f"{args.corpus} {v} seed {seed}: {stats['wall_s']} s, {stats['quality']}", flush=True)
    agreement = {}
    for i, a in enumerate(variants):  # same seed, every pair of variants
        for b in variants[i + 1:]:
            agreement[f"{a}_vs_{b}"] = median_range([round(neighbour_agreement(*x, *y), 4)
                                               for x, y in zip(vectors[a], vectors[b])])
    other_seeds = agreement_between_processes(vectors)
    bands = {v: {band: median_range([r["quality"]["mean_norm"][band] for r in runs[v]])
                 for band in runs[v][0]["quality"]["mean_norm"]} for v in variants}
    result = {"command": "python " + " ".join(sys.argv), "device": str(device), "processor": processor(),
              "corpus": str(path), "seeds": args.seeds,
              "line_job_tokens": args.line_job_tokens,
              "epochs": args.epochs, "chunk_tokens": args.chunk_tokens, "runs": runs,
              "neighbour_agreement_top10_of_1000": {"same_seed": agreement, "other_seeds": other_seeds},
              "mean_norm_by_band": bands}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    for title, table in (("same seed", agreement), ("other seeds", other_seeds)):
        for key, value in table.items():
            print(f"{title:12s} {key:24s} {value['median']:.4f} ({value['min']:.4f}-{value['max']:.4f})")
    for v in variants:
        print(v, {band: s["median"] for band, s in bands[v].items()})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
