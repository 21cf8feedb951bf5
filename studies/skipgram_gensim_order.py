"""How much of "agreement with gensim" is the order of the text? gensim against itself with the
documents shuffled.

The skip-gram comparison (``skipgram_vs_gensim.py``) asks the zoo's embedding to share as many of
each frequent word's 10 nearest neighbours with gensim's as gensim's own seeds share (same file,
same order, other seed). SGD's result depends on the order it sees the text in, and the zoo's
minibatch path (the GPU's) does not visit the text in gensim's order. This runs gensim 4 with
the same settings as that benchmark on each corpus as it is and with its lines (documents)
shuffled, seeds 0..R-1 (shuffle s paired with seed s), and reports the neighbour agreement of
every pairing and each run's quality (wordsim353, simlex999, analogies, the negative-sampling
loss on fixed probe pairs): the agreement two equally valid orders give.

    python studies/skipgram_gensim_order.py [--corpora wiki,lee,wiki10m] [--repeats 3]

wiki10m is the Wikipedia text repeated to 10M words in text8's format (one line, as the other
benchmarks build it); its shuffled order is each repeat's 106 articles in a new random order.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))  # skipgram_vs_gensim.py
from skipgram_vs_gensim import ROOT, loop_quality, quality_medians, run_gensim

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import add_device_option, describe, processor, resolve_device
from benchmarks.common.skipgram_measures import (
    big_corpus,
    lee_corpus,
    neighbour_agreement,
    objective_probe,
    similarity_files,
    wiki_corpus,
)
from zoo.spread import median_range


def shuffled_copy(path: Path, seed: int) -> Path:
    """The corpus with its lines (documents) in a random order, seeded."""
    lines = path.read_text(encoding="utf-8").splitlines()
    random.Random(seed).shuffle(lines)
    out = path.with_name(f"{path.stem}_shuffled{seed}.txt")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def run_corpus(path: Path, similarity: list[str], analogies: list[str], repeats: int, epochs: int,
               workers: int, shuffle=shuffled_copy) -> dict:
    probe = objective_probe(path)
    runs: dict[str, list] = {"as_is": [], "shuffled": []}
    vectors: dict[str, list] = {"as_is": [], "shuffled": []}
    for seed in range(repeats):
        for order in runs:
            corpus = path if order == "as_is" else shuffle(path, seed)
            stats, vec, words = run_gensim(corpus, epochs, seed, workers)
            runs[order].append(loop_quality(stats, vec, words, similarity, analogies, probe))
            vectors[order].append((vec, words))
            print(f"{path.name} {order} seed {seed}: {stats['quality']}", flush=True)
            if corpus != path:
                corpus.unlink()
    a, s = vectors["as_is"], vectors["shuffled"]
    pairs = [(i, j) for i in range(repeats) for j in range(i + 1, repeats)]
    agreement = {
        "as_is_vs_as_is": median_range([neighbour_agreement(*a[i], *a[j]) for i, j in pairs]),  # seed to seed
        "shuffled_vs_as_is_same_seed": median_range([neighbour_agreement(*s[i], *a[i]) for i in range(repeats)]),
        "shuffled_vs_as_is_other_seed": median_range([neighbour_agreement(*s[i], *a[j]) for i, j in pairs]),
        "shuffled_vs_shuffled": median_range([neighbour_agreement(*s[i], *s[j]) for i, j in pairs]),
    }
    quality = {order: quality_medians(rs) for order, rs in runs.items()}
    return {"file": str(path), "runs": runs, "quality": quality, "neighbour_agreement_top10_of_1000": agreement}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--corpora", default="wiki,lee", help="wiki, lee, wiki10m")
    parser.add_argument("--repeats", type=int, default=3, help="seeds (and shuffles) per order; at least 2")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2, help="gensim's threads")
    parser.add_argument("--work", default=str(ROOT / "data" / "skipgram_bench"))
    parser.add_argument("--out", default=str(ROOT / "studies" / "results" / "skipgram_gensim_order.json"))
    add_device_option(parser)
    args = parser.parse_args()
    device = resolve_device(args.device)
    if device.type != "cpu":
        parser.error("gensim runs on the CPU only: --device cpu")
    if args.repeats < 2:
        parser.error("--repeats must be at least 2 (seed-to-seed agreement needs two runs)")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    ws353, simlex, questions = similarity_files()
    builders = {"wiki": (wiki_corpus, shuffled_copy), "lee": (lee_corpus, shuffled_copy),
                "wiki10m": (lambda w: big_corpus(w, 10_000_000),
                            lambda path, seed: big_corpus(work, 10_000_000, shuffle_seed=seed))}
    report = {"command": shlex.join(["python", "studies/skipgram_gensim_order.py", *sys.argv[1:]]),
              "device": str(device), "machine": processor(), "device_name": describe(device), "repeats": args.repeats,
              "epochs": args.epochs, "gensim_workers": args.workers, "corpora": {}}
    for name in args.corpora.split(","):
        if name not in builders:
            parser.error(f"unknown corpus {name!r}: one of {sorted(builders)}")
        build, shuffle = builders[name]
        report["corpora"][name] = run_corpus(build(work), [ws353, simlex], [questions], args.repeats,
                                             args.epochs, args.workers, shuffle)
        print(name, json.dumps(report["corpora"][name]["neighbour_agreement_top10_of_1000"]), flush=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
