"""One MAML meta-iteration (second-order meta-gradient, 1 inner step): the zoo's batched path vs the
per-task loop (plain autograd), the batched path with a ``vmap(functional_call)`` forward instead of
the net's own ``batched_forward`` (the MLP's bmm, the conv net's per-task or grouped convolutions), the
textbook ``vmap(grad(...))`` (sinusoid) and ``higher`` (if installed:
``pip install -e .[bench]``). Every path's meta-gradient is checked against the loop's before timing.

Settings (issue 12): the sinusoid net (1-40-40-1) at meta-batch 25, K = 10 support + 10 query points;
the Omniglot conv net (4 x 64 filters, batch-statistics batch norm), 5-way 1-shot, 15 queries per
class, meta-batch 32, 28x28 images.

The paths are timed in turn, one repetition of each after another, so that all see the same machine load.
Each setting also states a meta-iteration's FLOPs (matrix products and convolutions, forward and backward,
counted by ``torch.utils.flop_counter``) and the share of this machine's matmul rate (float32, 1,024 x 1,024
products, best of 5, measured in the same run) that each path reaches.

    python benchmarks/maml_vs_loop.py                    # CPU, 1 thread
    python benchmarks/maml_vs_loop.py --device cuda      # GPU
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import add_device_option, resolve_device  # noqa: E402
from zoo.models.maml import meta  # noqa: E402
from zoo.models.maml.nets import MLP, ConvNet  # noqa: E402
from zoo.tracking import float32_precision  # noqa: E402


def setting(name: str, device: str):
    """The net, a fixed meta-batch (drawn on the CPU from a seeded generator, then moved), the loss, alpha."""
    g = torch.Generator().manual_seed(0)  # cpu: seeded draws, moved to --device below
    torch.manual_seed(0)

    def rand(*shape):
        return torch.rand(*shape, generator=g).to(device)  # cpu: seeded draw, moved to --device

    if name == "sinusoid":
        T, K = 25, 10
        x = rand(T, 2 * K, 1) * 10 - 5
        y = (rand(T, 1, 1) * 4.9 + 0.1) * torch.sin(x - rand(T, 1, 1) * 3.14)
        return MLP().to(device), (x[:, :K], y[:, :K], x[:, K:], y[:, K:]), F.mse_loss, 0.01
    T, N, Q = 32, 5, 15
    xs, xq = rand(T, N, 1, 28, 28), rand(T, N * Q, 1, 28, 28)
    ys = torch.arange(N, device=device).expand(T, -1)
    yq = torch.arange(N, device=device).repeat(Q).expand(T, -1)
    return ConvNet(N).to(device), (xs, ys, xq, yq), F.cross_entropy, 0.4


def zoo_path(path: str, **kwargs):
    def run(net, batch, loss_fn, alpha):
        params = dict(net.named_parameters())
        loss = meta.META_LOSSES[path](net, params, alpha, batch, loss_fn, 1, False, **kwargs)
        return torch.autograd.grad(loss, list(params.values()))
    return run


def higher_path(net, batch, loss_fn, alpha):
    import higher

    xs, ys, xq, yq = batch
    params = list(net.parameters())
    total = [torch.zeros_like(p) for p in params]
    inner = torch.optim.SGD(net.parameters(), lr=alpha)
    for i in range(len(xs)):
        with higher.innerloop_ctx(net, inner, copy_initial_weights=False) as (fnet, diffopt):
            diffopt.step(loss_fn(fnet(xs[i]), ys[i]))
            q = loss_fn(fnet(xq[i]), yq[i]) / len(xs)
            for acc, g in zip(total, torch.autograd.grad(q, params)):
                acc += g
    return tuple(total)


def timed(fn, args, device: str) -> float:
    """Seconds of one call."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t = time.perf_counter()
    fn(*args)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - t


def matmul_rate(device: str, n: int = 1024, reps: int = 10) -> float:
    """FLOP/s of an (n x n) @ (n x n) float32 product on ``device`` with the threads set: the best of 5
    rounds of ``reps``."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    a @ b  # warm-up
    best = min(timed(lambda: [a @ b for _ in range(reps)], (), device) for _ in range(5))
    return 2 * n ** 3 * reps / best


def count_flops(fn, args) -> int:
    """FLOPs of one call: matrix products and convolutions, forward and backward (torch's flop counter)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn(*args)
    return int(counter.get_total_flops())


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_device_option(p)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--settings", nargs="+", default=["sinusoid", "omniglot"])
    p.add_argument("--reps", type=int, default=0, help="timed repetitions (0: 50 sinusoid, 5 conv on CPU)")
    p.add_argument("--out", default="")
    args = p.parse_args()
    args.device = str(resolve_device(args.device))
    torch.set_num_threads(args.threads)
    try:
        import higher  # noqa: F401

        have_higher = True
    except ImportError:
        have_higher = False
    rate = matmul_rate(args.device)
    print(f"matmul rate: {rate / 1e9:.1f} GFLOP/s (float32, 1024 x 1024, {args.threads} thread(s))", flush=True)
    record = {"command": "python " + " ".join(sys.argv), "device": args.device, "threads": args.threads,
              "matmul_gflops": round(rate / 1e9, 2),
              "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
              "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
              "note": "medians of wall-clock times; on the CPU the 2 cores were shared with other jobs",
              "tf32": "gradients checked with TF32 off; timed with the device's defaults (cuDNN: TF32 on)",
              "settings": {}}
    for name in args.settings:
        net, batch, loss_fn, alpha = setting(name, args.device)
        conv = name == "omniglot"
        paths = {"batched": zoo_path("batched"), "loop": zoo_path("loop"),
                 "batched_vmap": zoo_path("batched", net_batched=False)}  # vmap(functional_call) forward
        if not conv:
            paths["vmap_grad"] = zoo_path("vmap_grad")
        if have_higher:
            paths["higher"] = higher_path
        reps = args.reps or (5 if conv and not args.device.startswith("cuda") else 50)
        # TF32 off for the gradient check: on an H100 cuDNN runs float32 convolutions in TF32 by default,
        # and the batched path's grouped convolutions then differed from the loop's by 2.3e-3, which says
        # nothing about the meta-gradient. The timings run with the device's defaults.
        with float32_precision("highest"):
            ref = paths["loop"](net, batch, loss_fn, alpha)
        scale = max(float(r.abs().max()) for r in ref)
        flops = count_flops(paths["loop"], (net, batch, loss_fn, alpha))
        res = {"tasks": len(batch[0]), "reps": reps, "flops_per_meta_iteration": flops, "paths": {}}
        times: dict[str, list[float]] = {}
        for pname, fn in paths.items():
            with float32_precision("highest"):
                got = fn(net, batch, loss_fn, alpha)
            err = max(float((a - b).abs().max()) for a, b in zip(got, ref))
            res["paths"][pname] = {"max_abs_grad_diff_vs_loop": err, "gradient_matches": err <= 1e-4 * max(scale, 1.0)}
            fn(net, batch, loss_fn, alpha)  # warm-up with the device's defaults
            times[pname] = []
        for _ in range(reps):  # the paths in turn: each sees the same load
            for pname, fn in paths.items():
                times[pname].append(timed(fn, (net, batch, loss_fn, alpha), args.device))
        for pname, ts in times.items():
            median = statistics.median(ts)
            res["paths"][pname].update(median_s=median, min_s=min(ts), gflops=round(flops / median / 1e9, 3),
                                       share_of_matmul_rate=round(flops / median / rate, 4))
            print(f"{name:9s} {pname:10s} median {median * 1e3:9.2f} ms   {flops / median / 1e9:6.2f} GFLOP/s "
                  f"({100 * flops / median / rate:4.1f} % of matmul)   |grad - loop| "
                  f"{res['paths'][pname]['max_abs_grad_diff_vs_loop']:.1e} "
                  f"{'ok' if res['paths'][pname]['gradient_matches'] else 'MISMATCH'}", flush=True)
        print(f"{name}: {flops / 1e6:.2f} MFLOP a meta-iteration", flush=True)
        loop_t = res["paths"]["loop"]["median_s"]
        res["loop_over_batched"] = round(loop_t / res["paths"]["batched"]["median_s"], 2)
        # minima too: on a loaded machine the 100x longer loop is preempted more often, which moves the
        # medians' ratio with the load; the minima are the least disturbed times of each path
        res["loop_over_batched_min"] = round(res["paths"]["loop"]["min_s"] / res["paths"]["batched"]["min_s"], 2)
        res["auto_path_chooses"] = meta.resolve_path("auto", conv, torch.device(args.device))
        print(f"{name}: loop / batched = {res['loop_over_batched']}x (medians), "
              f"{res['loop_over_batched_min']}x (minima); the model's auto path: "
              f"{res['auto_path_chooses']}", flush=True)
        record["settings"][name] = res
        out = Path(args.out or ROOT / f"benchmarks/results/maml_vs_loop_{args.device.split(':')[0]}.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=1) + "\n")  # after each setting: a run cut short keeps them
        print(f"wrote {out}")
        assert all(v["gradient_matches"] for v in res["paths"].values()), "meta-gradients differ"


if __name__ == "__main__":
    main()
