"""SeqGAN's text metrics against torchmetrics' BLEUScore, side by side on the same samples: BLEU of
samples against a reference set, and self-BLEU (each sample against all the others). The zoo finds each
n-gram's largest reference count once; torchmetrics counts every reference again for every sample. The
scores must agree to 1e-9; the times are the medians of repeats, and the ratio is torchmetrics' / the zoo's.

    python benchmarks/seqgan_bleu.py   # -> benchmarks/results/seqgan_bleu.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import add_device_option, processor, resolve_device  # noqa: E402
from zoo.models.seqgan.data import grammar_sentences  # noqa: E402
from zoo.models.seqgan.evaluation import bleu, bleu_orders, self_bleu  # noqa: E402


def timed(fn, repeats: int) -> tuple[dict, float]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_device_option(ap)  # recorded only: BLEU counts words in Python
    ap.add_argument("--samples", type=int, nargs="+", default=[100, 200])  # bleu_samples, test_bleu_samples
    ap.add_argument("--refs", type=int, default=300)  # the recipes' bleu_refs
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/seqgan_bleu.json"))
    args = ap.parse_args()
    device = resolve_device(args.device)
    rows = []
    for n in args.samples:
        sents = grammar_sentences(n + args.refs, 0)  # the embedded text corpus's grammar
        random.Random(0).shuffle(sents)
        samples, refs = sents[:n], sents[n:]
        others = [samples[:i] + samples[i + 1:] for i in range(n)]
        pairs = {"bleu": (lambda s=samples, r=refs: bleu(s, r), lambda s=samples, r=refs: bleu_orders(s, [r] * len(s))),
                 "self_bleu": (lambda s=samples: self_bleu(s), lambda s=samples, o=others: bleu_orders(s, o))}
        for metric, (zoo, peer) in pairs.items():
            ours, t_zoo = timed(zoo, args.repeats)
            theirs, t_peer = timed(peer, args.repeats)
            if any(abs(ours[k] - theirs[k]) > 1e-9 for k in ours):
                raise SystemExit(f"{metric} of {n} samples: the zoo gives {ours}, torchmetrics {theirs}")
            row = {"metric": metric, "samples": n, "refs": args.refs if metric == "bleu" else n - 1,
                   "zoo_s": round(t_zoo, 4), "torchmetrics_s": round(t_peer, 4), "ratio": round(t_peer / t_zoo, 1),
                   "scores": ours}
            rows.append(row)
            print(f"{metric:9s} {n:5d} samples: zoo {t_zoo:.3f} s, torchmetrics {t_peer:.3f} s, "
                  f"{row['ratio']}x; BLEU-4 {ours[4]:.4f} in both")
    record = {"command": " ".join(["python benchmarks/seqgan_bleu.py", *sys.argv[1:]]),
              "device": str(device), "machine": processor(), "repeats": args.repeats, "rows": rows}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
