"""gensim's learning-rate decay by lines against by words, next to the zoo's (by words, as word2vec.c).

gensim's ``Word2Vec(sentences)`` and ``train(total_examples=...)`` lower the learning rate by the share of
*lines* (sentences) pushed, once per job of at most 10,000 words; word2vec.c and the zoo lower it by the
share of words. On a corpus whose lines differ in length (the Wikipedia text: 51 to 15,298 words a line)
the two schedules differ along the way. One worker / one thread each (one process: the order of updates
is the same), seeds 0..n-1: vector length by frequency band, similarity scores, probe loss, and the
neighbour agreement of every pair of runs with different seeds.

    python studies/skipgram_gensim_decay.py --seeds 0 1 2 3 4 --out studies/results/skipgram_gensim_decay.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))  # skipgram_vs_gensim.py
from skipgram_vs_gensim import HYPER, ROOT, loop_quality, run_zoo, similarity_files  # noqa: E402

from benchmarks.common.devices import add_device_option, processor, resolve_device  # noqa: E402
from benchmarks.common.skipgram_measures import agreement_between_processes, objective_probe, wiki_corpus  # noqa: E402
from zoo.spread import median_range  # noqa: E402


def run_gensim_decay(corpus: Path, epochs: int, seed: int, decay: str) -> tuple[dict, torch.Tensor, list[str]]:
    """gensim, one worker, its rate lowered by lines (``examples``, gensim's default) or by words."""
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence

    sentences = list(LineSentence(str(corpus)))
    model = Word2Vec(vector_size=HYPER["dim"], window=HYPER["window"], min_count=HYPER["min_count"],
                     sample=HYPER["sample"], sg=1, hs=0, negative=HYPER["negative"], alpha=HYPER["lr"],
                     min_alpha=HYPER["min_lr"], workers=1, seed=seed)
    model.build_vocab(sentences)
    start = time.perf_counter()
    count = {"total_examples": len(sentences)} if decay == "examples" else {"total_words": model.corpus_total_words}
    effective, raw = model.train(sentences, epochs=epochs, **count)
    stats = {"effective_words": effective, "raw_words": raw, "train_s": round(time.perf_counter() - start, 2),
             "context_vectors": torch.from_numpy(model.syn1neg.copy())}
    return stats, torch.from_numpy(model.wv.vectors.copy()), list(model.wv.index_to_key)


def main() -> None:
    from zoo.tracking import quiet_lightning

    quiet_lightning()
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--work", default=str(ROOT / "data" / "skipgram_bench"))
    parser.add_argument("--out", default=str(ROOT / "studies" / "results" / "skipgram_gensim_decay.json"))
    add_device_option(parser)
    parser.add_argument("--variants", default="gensim_by_lines,gensim_by_words,zoo_by_words",
                        help="which of gensim_by_lines, gensim_by_words, zoo_by_words to run")
    parser.add_argument("--zoo", nargs="*", default=[], metavar="KEY=VALUE", help="the zoo's model options")
    args = parser.parse_args()
    device = resolve_device(args.device)
    if device.type != "cpu":  # the sequential kernel (numba) and gensim run on the CPU only
        raise SystemExit(f"--device {args.device}: this benchmark compares CPU kernels; use --device cpu")
    work = Path(args.work)
    path = wiki_corpus(work)
    wordsim, simlex, analogies = similarity_files()
    probe = objective_probe(path)
    variants = args.variants.split(",")
    zoo_options = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.zoo)}
    runs: dict[str, list] = {v: [] for v in variants}
    vectors: dict[str, list] = {v: [] for v in variants}
    for seed in args.seeds:
        for v in variants:
            if v.startswith("gensim"):
                stats, vec, words = run_gensim_decay(path, args.epochs, seed, "examples" if "lines" in v else "words")
            else:
                cpu = torch.device("cpu")
                stats, vec, words = run_zoo(path, args.epochs, seed, 1, work / "cache", zoo_options, cpu)
            stats = loop_quality(stats, vec, words, [wordsim, simlex], [analogies], probe)  # with mean_norm
            runs[v].append(stats)
            vectors[v].append((vec, words))
            print(f"{v} seed {seed}: {stats['quality']}", flush=True)
    agreement = agreement_between_processes(vectors)
    summary = {v: {"mean_norm": {band: statistics.median(r["quality"]["mean_norm"][band] for r in runs[v])
                                 for band in runs[v][0]["quality"]["mean_norm"]},
                   "wordsim353": median_range([r["quality"]["wordsim353"]["spearman"] for r in runs[v]]),
                   "simlex999": median_range([r["quality"]["simlex999"]["spearman"] for r in runs[v]]),
                   "probe_loss": median_range([r["quality"]["probe"]["ns_loss"] for r in runs[v]])} for v in variants}
    result = {"command": "python " + " ".join(sys.argv), "device": str(device), "processor": processor(),
              "corpus": str(path), "seeds": args.seeds,
              "zoo_options": zoo_options, "runs": runs,
              "neighbour_agreement_other_seeds": agreement, "summary": summary}
    Path(args.out).write_text(json.dumps(result, indent=1))
    for key, value in agreement.items():
        print(f"{key:36s} {value['median']:.4f} ({value['min']:.4f}-{value['max']:.4f})")
    for v in variants:
        s = summary[v]
        print(v, s["mean_norm"], "wordsim353", s["wordsim353"]["median"], "simlex", s["simlex999"]["median"],
              "probe", s["probe_loss"]["median"])
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
