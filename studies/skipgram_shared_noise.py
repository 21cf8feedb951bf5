"""The skip-gram kernel with k noise words drawn for every (context, word) pair (word2vec.c, gensim) against one
draw shared by ``share`` pairs of a window in turn (the kernel's ``share_noise``; 0 = the whole window, what
``model.share_negatives=true`` trains; 1 = ``false``).

``--kernel``: one thread, one subsampled 1M-word chunk of the Wikipedia text repeated to 10M words (V 34k),
tables as after one pass over it; each setting trains the same part from the same tables, in turn,
``--repeats`` times, timed in CPU seconds of the thread (steadier than wall time on a shared machine), with
the noise draws it makes. ``--e2e`` takes the two settings the model's key reaches, 1 and 0 (the record
``studies/results/skipgram_shared_noise_e2e.json`` also holds 2 and 3, made at 633ae10 through the model key
``share_noise`` that this one replaced).

``--e2e``: the benchmark's whole command (``benchmarks/skipgram_vs_gensim.py --what e2e``'s, 10M words, 2
threads) for each setting and seed, in turn: wall and CPU seconds, and the top-10 neighbour agreement with
gensim's runs of other seeds (made once into ``--work``, as the benchmark makes them) beside gensim's with itself.

    python studies/skipgram_shared_noise.py --kernel [--repeats 5] [--tokens 400000] [--shares 1,2,3,0]
    python studies/skipgram_shared_noise.py --e2e [--shares 1,2,0] [--seeds 2] [--gensim-seeds 0,1]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's zoo and benchmarks/common/

from benchmarks.common.devices import add_device_option, resolve_device  # noqa: E402
from benchmarks.common.skipgram_measures import big_corpus, neighbour_agreement  # noqa: E402
from studies.skipgram_prefetch import setup  # noqa: E402
from zoo.models.skipgram import kernel  # noqa: E402


def kernel_times(args) -> dict:
    (tokens, sentence, reduced), (keep, alias), vocab, n, (start0, start1) = setup(Path(args.work), args.tokens)
    work, no_nce = np.empty(100, np.float32), np.empty(0, np.float32)
    table = kernel.compact_noise(keep, alias)

    def call(share, syn0, syn1, lo, hi):  # the recipe's settings: k 5, gensim's saturation rule, exact sigmoid index
        return kernel._train_part(tokens, sentence, reduced, lo, hi, syn0, syn1, *table, no_nce, 5, 0.025, 0.02,
                                  len(tokens), 7, work, True, 1000, kernel.TABLE_SCALE["exact"],
                                  kernel.pairs_per_draw(share, reduced))

    call(1, start0, start1, 0, len(tokens))  # tables as after a pass
    shares = [int(x) for x in args.shares.split(",")]
    seconds: dict[int, list[float]] = {share: [] for share in shares}
    pairs = {}
    for _ in range(args.repeats):
        for share in shares:  # in turn: all see the same load
            syn0, syn1 = start0.copy(), start1.copy()
            t = time.thread_time()
            _, pairs[share], _ = call(share, syn0, syn1, 0, n)
            seconds[share].append(time.thread_time() - t)
    draws = {}  # k per draw; a centre's p-th pair draws when p % share == 0
    for share in shares:
        count, per_draw = 0, kernel.pairs_per_draw(share, reduced)
        for i in range(n):
            lo, hi = max(0, i - reduced[i]), min(len(tokens) - 1, i + reduced[i])
            p = int(np.sum(sentence[lo:hi + 1] == sentence[i])) - 1  # the centre's pairs
            count += -(-p // per_draw)
        draws[share] = 5 * count
    base = shares[0]
    return {"vocabulary": vocab, "tokens": n, "pairs": pairs[base], "noise_draws": draws, "cpu_seconds": seconds,
            f"over_share_{base}_min": {s: round(min(seconds[base]) / min(v), 3) for s, v in seconds.items()},
            f"over_share_{base}_median": {s: round(statistics.median(seconds[base]) / statistics.median(v), 3)
                                          for s, v in seconds.items()}}


def e2e(args) -> dict:
    import torch
    from gensim.models import KeyedVectors

    from benchmarks.skipgram_vs_gensim import e2e_gensim, e2e_zoo, warm_kernel

    work = Path(args.work)
    corpus = big_corpus(work, 10_000_000)
    gensim = {}
    for seed in [int(x) for x in args.gensim_seeds.split(",")]:
        path = work / f"gensim_{seed}.bin"
        if not path.exists():  # made once, as the benchmark makes them
            e2e_gensim(corpus, 5, seed, work)
        kv = KeyedVectors.load_word2vec_format(str(path), binary=True)
        gensim[seed] = (torch.from_numpy(kv.vectors.copy()), list(kv.index_to_key))
    shares = [int(x) for x in args.shares.split(",")]
    if set(shares) - {0, 1}:
        raise SystemExit("--e2e: shares 1 (model.share_negatives=false) and 0 (true) only")
    g = list(gensim)
    out = {"gensim_seeds": g, "gensim_vs_gensim": [neighbour_agreement(*gensim[a], *gensim[b])
                                                   for i, a in enumerate(g) for b in g[i + 1:]], "runs": []}
    warm_kernel()
    for seed in [int(x) for x in args.seeds.split(",")]:
        for share in shares:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            options = {"share_negatives": share == 0}
            stats, vectors, words = e2e_zoo(corpus, 5, seed, 2, work, options, torch.device("cpu"))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            agree = [neighbour_agreement(vectors, words, *gensim[b]) for b in g if b != seed]
            run = {"share_noise": share, "seed": seed, "wall_s": stats["wall_s"], "cpu_s": round(cpu, 1),
                   "agreement_with_gensim": agree, "command": stats["command"]}
            print(json.dumps(run), flush=True)
            out["runs"].append(run)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--kernel", action="store_true", help="the kernel alone, one thread")
    parser.add_argument("--e2e", action="store_true", help="whole commands at 10M words, with agreement")
    parser.add_argument("--shares", default="1,0", help="share_noise settings; the first is the base")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=400_000, help="tokens of the chunk trained per repeat")
    parser.add_argument("--seeds", default="2", help="--e2e: the zoo's seeds")
    parser.add_argument("--gensim-seeds", default="0,1", help="--e2e: gensim's runs compared with")
    parser.add_argument("--work", default=str(ROOT / "data" / "skipgram_bench"))
    parser.add_argument("--out", required=True)
    add_device_option(parser)
    args = parser.parse_args()
    device = resolve_device(args.device)
    if device.type != "cpu":
        raise SystemExit(f"--device {device}: the kernel compared here is the CPU's (numba); use --device cpu")
    record = {"command": "python " + " ".join(sys.argv), "device": str(device)}
    if args.kernel:
        record["kernel"] = kernel_times(args)
    if args.e2e:
        record["e2e"] = e2e(args)
    print(json.dumps(record, indent=1))
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
