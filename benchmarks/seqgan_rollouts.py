"""One SeqGAN generator update with batched rollouts vs the paper's per-time-step rollout loop.

    python benchmarks/seqgan_rollouts.py [--configs paper,small,tiny] [--repeats 5] [--threads 1] [--device cuda]

The update is the zoo's own code path (``SeqGAN.sample_and_reward`` + ``pg_loss`` + Adam step):
sample B sequences, complete every prefix t < T with N rollouts of the rollout network, score the
completions with D, REINFORCE step. The two variants differ only in ``batched_rollouts``:
- batched: all (T-1) x N x B completions in one generation of T-1 steps, D in a few large calls;
- looped: for each rollout n, for each prefix length t: teacher-force the prefix, sample the rest,
  call D (N * (T-1) generations of up to T steps and N * (T-1) D calls, like the reference code).
Both draw their noise from the same generator (one uniform per sampled token, indexed by
(t, n, b, position)), so under one seed they produce the same completions, the same Q and the same
updated G; the script checks that and prints the speed ratio: median looped time over median batched time,
after --warmup updates that are timed but left out (the first builds D's lookup tables and warms
the allocator). Writes
benchmarks/results/seqgan_rollouts.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.common.devices import add_device_option, describe, processor, resolve_device, synchronize  # noqa: E402

PAPER_D = (
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20],
    [100, 200, 200, 200, 200, 100, 100, 100, 100, 100, 160, 160],
)
CONFIGS = {
    # the paper's synthetic experiment: vocab 5000, G 32/32, D with 1,720 filters, B 64, N 16, T 20
    "paper": {"vocab": 5000, "d": PAPER_D, "B": 64, "N": 16, "T": 20},
    # the seqgan_oracle_small recipe: vocab 1000, a quarter of the paper's filters
    "small": {"vocab": 1000, "d": (PAPER_D[0], [n // 4 for n in PAPER_D[1]]), "B": 64, "N": 16, "T": 20},
    # launch-bound: a small vocabulary and a small D (embedding 16), where per-call overhead dominates
    # the update, as it does on a GPU
    "tiny": {"vocab": 100, "d": ([1, 2, 3], [16, 16, 16]), "d_emb": 16, "B": 64, "N": 16, "T": 20},
}


def build(cfg: dict, batched: bool, seed: int, device: torch.device):
    import lightning as L

    from zoo.models.seqgan.module import SeqGAN

    L.seed_everything(seed, verbose=False)
    info = {"vocab_size": cfg["vocab"], "seq_len": cfg["T"], "start_token": 0, "num_train": 10000}
    model = SeqGAN(
        {
            "dis_filter_sizes": cfg["d"][0],
            "dis_emb_dim": cfg.get("d_emb", 64),
            "dis_num_filters": cfg["d"][1],
            "adv_batch_size": cfg["B"],
            "rollouts": cfg["N"],
            "batched_rollouts": batched,
        },
        info,
    )
    model.rollout.load_state_dict(model.gen.state_dict())
    model.rollout_ready.fill_(1)
    return model.to(device)


def g_update(model, opt, seed: int) -> tuple[float, torch.Tensor]:
    """One generator update as in training; returns (seconds, Q)."""
    synchronize(model.device)
    t0 = time.perf_counter()
    seqs, q = model.sample_and_reward(torch.Generator(device=model.device).manual_seed(seed))
    loss = model.pg_loss(seqs, q)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.gen.parameters(), 5.0)
    opt.step()
    synchronize(model.device)
    return time.perf_counter() - t0, q


def rollout_generation(model, cfg: dict, repeats: int) -> tuple[dict, bool, float]:
    """Time the rollout generation alone (no D), batched vs looped, on the same noise; also whether
    the completions are identical, and the share of completed tokens that are (on a GPU the LSTM's
    float rounding differs between the two batch shapes, and a uniform that falls on a boundary of
    the cumulative probabilities picks the neighbouring token)."""
    from zoo.models.seqgan.rollout import batched_rollouts, looped_rollouts, rollout_uniforms

    device = model.device
    seqs = model.gen.sample(cfg["B"], cfg["T"], generator=torch.Generator(device=device).manual_seed(7))
    times, same, equal = {"batched": [], "looped": []}, True, []
    for r in range(repeats):
        u = rollout_uniforms(cfg["B"], cfg["T"], cfg["N"], torch.Generator(device=device).manual_seed(r))
        done = {}
        for key, fn in (("batched", batched_rollouts), ("looped", looped_rollouts)):
            synchronize(device)
            t0 = time.perf_counter()
            done[key] = fn(model.rollout, seqs, cfg["N"], u)
            synchronize(device)
            times[key].append(time.perf_counter() - t0)
        same = same and torch.equal(done["batched"], done["looped"])
        equal.append((done["batched"] == done["looped"]).float().mean().item())
    return times, same, min(equal)


def run_config(name: str, cfg: dict, repeats: int, warmup: int, device: torch.device) -> dict:
    base = build(cfg, True, 0, device)
    models = {"batched": base, "looped": copy.deepcopy(base)}
    models["looped"].cfg.batched_rollouts = False
    opts = {k: torch.optim.Adam(m.gen.parameters(), lr=0.01) for k, m in models.items()}
    times = {k: [] for k in models}
    max_q_diff, max_w_diff = 0.0, 0.0
    for r in range(warmup + repeats):  # alternate, so both see the same machine load
        qs = {}
        for key in ("batched", "looped"):
            seconds, qs[key] = g_update(models[key], opts[key], seed=100 + r)
            times[key].append(seconds)
        max_q_diff = max(max_q_diff, (qs["batched"] - qs["looped"]).abs().max().item())
        w = [
            (a - b).abs().max().item()
            for a, b in zip(models["batched"].gen.parameters(), models["looped"].gen.parameters())
        ]
        max_w_diff = max(max_w_diff, max(w))
    gen_times, same, equal_share = rollout_generation(models["batched"], cfg, warmup + repeats)
    kept = {k: v[warmup:] for k, v in times.items()}
    median = {k: statistics.median(v) for k, v in kept.items()}
    gen_median = {k: statistics.median(v[warmup:]) for k, v in gen_times.items()}
    T, N = cfg["T"], cfg["N"]
    out = {
        "config": {**cfg, "d_filters": sum(cfg["d"][1])},
        "seconds": times,
        "warmup": warmup,
        "median_seconds": median,
        "min_seconds": {k: min(v) for k, v in kept.items()},
        "ratio": median["looped"] / median["batched"],
        "max_abs_q_diff": max_q_diff,
        "max_abs_weight_diff_after_updates": max_w_diff,
        "completions_per_update": (T - 1) * N * cfg["B"],
        "generation_only": {
            "median_seconds": gen_median,
            "ratio": gen_median["looped"] / gen_median["batched"],
            "identical_completions": same,
            "equal_token_share": equal_share,  # the lowest over the repeats
        },
        "calls": {
            "batched": {"lstm_steps": T - 1 + T, "d_calls": "ceil(rows / 4096) + 1"},
            "looped": {"lstm_steps": N * (T - 1) * T, "d_calls": N * (T - 1) + 1},
        },
    }
    del out["config"]["d"]
    print(
        f"{name:<6} V={cfg['vocab']:<5} D filters={sum(cfg['d'][1]):<5} B={cfg['B']} N={N} T={T}: "
        f"median batched {median['batched']:.3f}s  looped {median['looped']:.3f}s  ratio {out['ratio']:.2f}x  "
        f"(max |dQ| {max_q_diff:.1e}, max |dW| {max_w_diff:.1e}); rollout generation alone: "
        f"{out['generation_only']['ratio']:.2f}x, identical completions: {same}",
        flush=True,
    )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="paper,small,tiny")
    p.add_argument("--repeats", type=int, default=5, help="timed updates per variant (the median is reported)")
    p.add_argument("--warmup", type=int, default=1, help="updates per variant timed but left out of the median")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "seqgan_rollouts.json"))
    add_device_option(p)
    args = p.parse_args()
    device = resolve_device(args.device)
    torch.set_num_threads(args.threads)
    report = {
        "device": str(device), "machine": processor(),
        "device_name": describe(device),
        "command": "python " + " ".join(sys.argv),
        "threads": args.threads,
        "torch": torch.__version__,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "results": {},
        "note": "same seed -> same completions, Q and G update on the CPU (on a GPU float rounding differs "
        "between the batch shapes: equal_token_share); ratio = median looped time / median batched time "
        "for one full G update (warm-up updates left out)",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    for name in args.configs.split(","):  # written after each config: a run cut short keeps what finished
        report["results"][name] = run_config(name, CONFIGS[name], args.repeats, args.warmup, device)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
