"""word2vec's sequential updates on a GPU (zoo/models/skipgram/gpu_kernel.py) against the CPU kernel, on one
chunk: first one job on each (the same updates: the tables must agree), then the GPU kernel's words/s with
J jobs at once against the CPU kernel's with one thread, on the same Zipfian chunk.

    python benchmarks/skipgram_gpu_kernel.py --device cuda [--tokens 1000000] [--vocab 30000] [--jobs 256,1024,4096]
                                          [--share-noise 0]

Needs a CUDA GPU (or --device cpu with TRITON_INTERPRET=1 and a few thousand tokens, to try it). The chunk is
synthetic (a Zipf law over --vocab words, sentences of 20, reduced windows of 1-5, 5 noise words, D 100),
so the speed, not the quality, is measured here; quality: skipgram_vs_gensim.py --zoo updates=sequential.
Writes benchmarks/results/skipgram_gpu_kernel.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import add_device_option, describe, processor, resolve_device, synchronize  # noqa: E402
from zoo.models.skipgram import gpu_kernel, kernel  # noqa: E402
from zoo.models.skipgram.sampling import AliasSampler, noise_distribution  # noqa: E402


def chunk(tokens: int, vocab: int, seed: int = 0) -> dict:
    """On the CPU, where the CPU kernel reads it; the GPU gets copies."""
    g = torch.Generator().manual_seed(seed)  # cpu: the chunk is drawn on the CPU, as the data pipeline does
    counts = (1e7 / torch.arange(1, vocab + 1, dtype=torch.float64)).round().long()  # Zipf  # cpu: see above
    ids = torch.multinomial(counts.double(), tokens, replacement=True, generator=g)
    return {"counts": counts, "tokens": ids, "sentence": torch.arange(tokens) // 20,  # cpu: see above
            "reduced": torch.randint(1, 6, (tokens,), generator=g)}  # cpu: see above


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--vocab", type=int, default=30_000)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--jobs", default="1024,4096,16384")
    parser.add_argument("--stripes", default="0,16", help="gpu_kernel.train_chunk's stripe: 0 = contiguous jobs, "
                        "S = job j takes the stripes of S tokens j, j + J, ...")
    parser.add_argument("--share-noise", type=int, default=0, help="both kernels' share_noise: 0 = one draw of "
                        "noise words a window (model.share_negatives=true, the default), 1 = a draw every pair")
    parser.add_argument("--check-tokens", type=int, default=3000, help="tokens of the one-job check")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "skipgram_gpu_kernel.json"))
    add_device_option(parser)
    args = parser.parse_args()
    device = resolve_device(args.device)
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("the Triton kernel runs on --device cuda (or on the CPU under TRITON_INTERPRET=1, slowly)")
    c = chunk(args.tokens, args.vocab)
    keep, alias = kernel.noise_table(AliasSampler(noise_distribution(c["counts"])))
    cpu_noise = kernel.compact_noise(keep, alias)  # the table as the CPU kernel reads it
    noise = (torch.from_numpy(keep).to(device), torch.from_numpy(alias).to(device))
    g = torch.Generator().manual_seed(1)  # cpu: the CPU kernel's tables; the GPU gets copies
    centre = (torch.rand(args.vocab, args.dim, generator=g) - 0.5) / args.dim  # cpu: as above
    context = torch.randn(args.vocab, args.dim, generator=g) * 0.01  # cpu: as above
    cpu_args = [c[k].numpy() for k in ("tokens", "sentence", "reduced")]
    result = {"command": "python " + " ".join(sys.argv), "device": str(device), "machine": processor(),
              "device_name": describe(device),
              "tokens": args.tokens, "vocab": args.vocab, "dim": args.dim, "torch": torch.__version__,
              "triton": gpu_kernel.triton.__version__, "share_noise": args.share_noise}
    cpu_share = kernel.pairs_per_draw(args.share_noise, c["reduced"])  # as the CPU kernel takes it

    # one job each on the first check_tokens tokens: the same updates
    n = args.check_tokens
    a, b = centre.clone(), context.clone()
    kernel._train_chunk(*(x[:n] for x in cpu_args), np.array([0, n]), 1, a.numpy(), b.numpy(), *cpu_noise,
                        np.empty(0, np.float32), 5, 0.025, 0.02, 7, True, kernel.TABLE_SCALE["exact"], cpu_share)
    x, y = centre.to(device), context.to(device)
    part = [c[k][:n].to(device) for k in ("tokens", "sentence", "reduced")]
    gpu_kernel.train_chunk(x, y, *part, noise, None, 5, 0.025, 0.02, 7, jobs=1, skip_saturated=True,
                           share_noise=args.share_noise)
    result["one_job_max_difference"] = max((x.cpu() - a).abs().max().item(), (y.cpu() - b).abs().max().item())
    result["one_job_tables_moved"] = (a - centre).abs().max().item()
    print(f"one job, {n} tokens: tables differ by {result['one_job_max_difference']:.2e} from the CPU kernel's "
          f"(moved {result['one_job_tables_moved']:.3f})", flush=True)

    # speed: the CPU kernel with one thread, then the GPU kernel with J jobs at once, each from fresh tables
    a, b = centre.clone(), context.clone()
    start = time.perf_counter()
    kernel._train_chunk(*cpu_args, np.array([0, args.tokens]), 1, a.numpy(), b.numpy(), *cpu_noise,
                        np.empty(0, np.float32), 5, 0.025, 0.02, 7, True, kernel.TABLE_SCALE["exact"], cpu_share)
    cpu_s = time.perf_counter() - start
    result["cpu_kernel_words_per_s"] = args.tokens / cpu_s
    print(f"CPU kernel, 1 thread: {args.tokens / cpu_s:,.0f} words/s", flush=True)
    on_device = [c[k].to(device) for k in ("tokens", "sentence", "reduced")]
    result["gpu"] = []
    for jobs, stripe in [(int(j), int(s)) for j in args.jobs.split(",") for s in args.stripes.split(",")]:
        times = []
        for _ in range(3):  # the first includes Triton's compilation
            x, y = centre.to(device), context.to(device)
            synchronize(device)
            start = time.perf_counter()
            stats = gpu_kernel.train_chunk(x, y, *on_device, noise, None, 5, 0.025, 0.02, 7, jobs=jobs,
                                           skip_saturated=True, stripe=stripe, share_noise=args.share_noise)
            loss = float(stats["loss"])  # waits for the kernel
            times.append(time.perf_counter() - start)
        best = min(times[1:]) if len(times) > 1 else times[0]
        row = {"jobs": jobs, "stripe": stripe, "seconds": times, "words_per_s": args.tokens / best, "loss": loss,
               "finite": bool(torch.isfinite(x).all() and torch.isfinite(y).all()),
               "x_cpu_kernel": args.tokens / best / result["cpu_kernel_words_per_s"]}
        result["gpu"].append(row)
        print(f"GPU kernel, {jobs} jobs, stripe {stripe}: {row['words_per_s']:,.0f} words/s "
              f"({row['x_cpu_kernel']:.1f}x the CPU kernel), loss {loss:.3f}, finite {row['finite']}", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
