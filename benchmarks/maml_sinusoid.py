"""The MAML paper's sinusoid table: K-shot MSE after 1, 5 and 10 gradient steps on 600 test tasks
(95 % intervals), MAML vs the network pretrained on all tasks, several seeds.

Paper (Finn et al. 2017), 5-shot: MAML 0.67 / 0.38 / 0.35, pretrained 2.41 / 2.23 / 2.19.

Each run meta-trains the zoo's ``maml`` model (the same class ``python -m zoo.train`` builds, without
the Trainer around it) on the ``sinusoid`` datamodule's training meta-batches, then fine-tunes on
the 600 fixed test tasks (K support points, MSE on 100 query points each). The pretrained baseline
is the same model with ``inner_steps=0`` (plain regression on all tasks' points), fine-tuned at test
time with step 0.01 and 0.02 (the paper's figure shows both). Every finished run is written to the
JSON at once, so an interrupted benchmark keeps its results.

    python benchmarks/maml_sinusoid.py                       # 70,000 iterations, K=5 and 10, 3 seeds
    python benchmarks/maml_sinusoid.py --iterations 2000 --seeds 0 --out /tmp/quick.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import add_device_option, resolve_device  # noqa: E402

PAPER_5SHOT = {"maml": [0.67, 0.38, 0.35], "pretrained": [2.41, 2.23, 2.19]}
PAPER_ITERATIONS = 70_000
REPORT_STEPS = (1, 5, 10)


def build(method: str, shots: int, seed: int, device: str, init: str = "torch"):
    from zoo.models.maml.data import SinusoidData
    from zoo.models.maml.module import MAML

    data = SinusoidData({"shots": shots, "seed": seed, "steps_per_epoch": 1000, "eval_query": 100})
    data.setup("fit")
    cfg = {"inner_steps": 1 if method == "maml" else 0, "inner_lr": 0.01, "lr": 1e-3, "eval_inner_steps": 10,
           "init": init}
    torch.manual_seed(seed)
    model = MAML(cfg, data.info()).to(device)
    return data, model


def train(model, data, iterations: int, device: str) -> tuple[float, list[float]]:
    opt = torch.optim.Adam(model.parameters(), lr=model.cfg.lr)
    per_epoch = len(data.train_set)
    trace, start = [], time.perf_counter()
    for i in range(iterations):
        batch = tuple(t.to(device) for t in data.train_set[(i % per_epoch, i // per_epoch)])
        loss = model.meta_loss(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i % 1000 == 0:
            trace.append(round(float(loss.detach()), 4))
    return time.perf_counter() - start, trace


def evaluate(model, data, device: str, inner_lr: float) -> dict:
    from zoo.models.maml import meta

    test = tuple(t.to(device) for t in data.fixed_tasks(data.cfg.test_tasks, data.cfg.eval_seed + 1))
    losses, _ = meta.adaptation_curve(model.net, model.params(), inner_lr, test, model.loss_fn, 10)  # (600, 11)
    mean, ci = losses.mean(0), 1.96 * losses.std(0) / math.sqrt(len(losses))
    # a mean over 600 tasks is inf when one task's fine-tuning overflows: the median and the count of
    # tasks that blew up (MSE after 10 steps non-finite or above 10x its value before adapting)
    # tell a few unstable tasks from a bad model
    diverged = (~torch.isfinite(losses[:, -1]) | (losses[:, -1] > 10 * losses[:, 0])).sum()
    return {"inner_lr": inner_lr, "mse": [round(float(v), 4) for v in mean],
            "ci95": [round(float(v), 4) for v in ci], "tasks": len(losses),
            "median_mse": [round(float(v), 4) for v in losses.nanmedian(0).values],
            "tasks_blown_up_by_10_steps": int(diverged)}


def measure(device: str, n: int = 300) -> dict:
    """Seconds per training iteration of each method (median of blocks of 50)."""
    out = {}
    for method in ("maml", "pretrained"):
        data, model = build(method, 10, 0, device)
        train(model, data, 50, device)  # warm-up
        blocks = [train(model, data, 50, device)[0] / 50 for _ in range(n // 50)]
        out[method] = sorted(blocks)[len(blocks) // 2]
    return out


def summary(runs: list[dict]) -> dict:
    """Mean over seeds (and the seeds' spread) of the MSE after 1/5/10 steps, per (method, K, lr)."""
    table: dict = {}
    for r in runs:
        for ev in r["eval"]:
            key = f"{r['method']}_{r['shots']}shot_lr{ev['inner_lr']}"
            row = [ev["mse"][s] for s in REPORT_STEPS] + [ev["ci95"][s] for s in REPORT_STEPS]
            table.setdefault(key, []).append(row)
    out = {}
    for key, rows in table.items():
        t = torch.tensor(rows)  # cpu: summary statistics
        spread = t[:, :3].std(0) if len(rows) > 1 else torch.zeros(3)  # cpu: summary statistics
        out[key] = {"seeds": len(rows), "mse_1_5_10": [round(float(v), 3) for v in t[:, :3].mean(0)],
                    "seed_std_1_5_10": [round(float(v), 3) for v in spread],
                    "mean_ci95_1_5_10": [round(float(v), 3) for v in t[:, 3:].mean(0)]}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--iterations", type=int, default=PAPER_ITERATIONS,
                   help="meta-iterations per run (the paper: 70,000)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--shots", type=int, nargs="+", default=[5, 10])
    p.add_argument("--methods", nargs="+", default=["maml", "pretrained"])
    add_device_option(p)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--init", choices=["torch", "paper"], default="torch",
                   help="MLP initialisation: PyTorch's defaults, or the paper code's truncated normal (std 0.01)")
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/maml_sinusoid.json"))
    p.add_argument("--plots", default=str(ROOT / "docs/img"), help="folder for the Figure-2 style plots")
    p.add_argument("--save-models", default="", help="folder: keep each run's meta-trained weights "
                   "(safetensors, <method>_<K>shot_seed<S>.safetensors) for later analysis")
    p.add_argument("--plot-from", default="", help="only draw MSE vs steps (MAML vs pretrained) from this JSON")
    args = p.parse_args()
    args.device = str(resolve_device(args.device))
    torch.set_num_threads(args.threads)
    if args.plot_from:
        plot_mse_vs_steps(json.loads(Path(args.plot_from).read_text()), Path(args.plots))
        return

    per_iter = measure(args.device)
    total = sum(per_iter[m] for m in args.methods) * args.iterations * len(args.seeds) * len(args.shots)
    print(f"seconds per iteration: {per_iter}; projected total {total / 60:.1f} min", flush=True)
    scaled = args.iterations != PAPER_ITERATIONS
    if scaled:
        print(f"SCALED SCHEDULE: {args.iterations:,} meta-iterations per run instead of the paper's "
              f"{PAPER_ITERATIONS:,} (recorded in the JSON)", flush=True)
    record = {"command": "python " + " ".join(sys.argv), "device": args.device, "threads": args.threads,
              "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
              "note": "2-core CPU shared with other jobs; times are wall-clock under that load",
              "schedule": {"iterations": args.iterations, "paper_iterations": PAPER_ITERATIONS,
                           "scaled": scaled, "meta_batch": 25, "inner_lr": 0.01, "meta_lr": 1e-3,
                           "train_inner_steps": {"maml": 1, "pretrained": 0}, "test_tasks": 600, "init": args.init,
                           "query_points_per_test_task": 100},
              "seconds_per_iteration": per_iter, "projected_minutes": round(total / 60, 1),
              "paper_5shot": PAPER_5SHOT, "runs": [], "status": "running"}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for shots in args.shots:
        for seed in args.seeds:
            for method in args.methods:
                data, model = build(method, shots, seed, args.device, args.init)
                seconds, trace = train(model, data, args.iterations, args.device)
                lrs = [0.01] if method == "maml" else [0.01, 0.02]
                evals = [evaluate(model, data, args.device, lr) for lr in lrs]
                if args.save_models:
                    from safetensors.torch import save_file

                    Path(args.save_models).mkdir(parents=True, exist_ok=True)
                    save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()},
                              str(Path(args.save_models) / f"{method}_{shots}shot_seed{seed}.safetensors"))
                run = {"method": method, "shots": shots, "seed": seed, "train_seconds": round(seconds, 1),
                       "loss_trace_every_1000": trace, "eval": evals}
                record["runs"].append(run)
                record["summary"] = summary(record["runs"])
                out.write_text(json.dumps(record, indent=1) + "\n")
                e = evals[0]
                print(f"K={shots} seed={seed} {method:10s} {seconds:6.0f}s  MSE after 1/5/10 steps: "
                      f"{e['mse'][1]:.3f} / {e['mse'][5]:.3f} / {e['mse'][10]:.3f}", flush=True)
                if seed == args.seeds[0] and args.plots:
                    save_plots(model, data, method, shots, Path(args.plots), e)
    record["status"] = "done"
    out.write_text(json.dumps(record, indent=1) + "\n")
    if args.plots and set(args.methods) >= {"maml", "pretrained"}:
        plot_mse_vs_steps(record, Path(args.plots))  # MSE vs steps, MAML vs pretrained, one panel per K
    print(json.dumps(record["summary"], indent=1))


def save_plots(model, data, method: str, shots: int, folder: Path, ev: dict) -> None:
    from zoo.models.maml import plots

    folder.mkdir(parents=True, exist_ok=True)
    fig = plots.sinusoid_adaptation(model, seed=3, shots=shots)
    fig.axes[0].set_title(f"{method}, K={shots}")
    fig.savefig(folder / f"maml_sinusoid_{method}_{shots}shot.png", dpi=100, bbox_inches="tight")


def plot_mse_vs_steps(record: dict, folder: Path) -> None:
    """Mean over seeds of the test MSE after 0..10 steps, MAML vs pretrained, one panel per K."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shots = sorted({r["shots"] for r in record["runs"]})
    fig, axes = plt.subplots(1, len(shots), figsize=(5 * len(shots), 3.6), squeeze=False)
    for ax, k in zip(axes[0], shots):
        for method in ("maml", "pretrained"):
            for lr in (0.01, 0.02):
                curves = [ev["mse"] for r in record["runs"] if r["shots"] == k and r["method"] == method
                          for ev in r["eval"] if ev["inner_lr"] == lr]
                if not curves:
                    continue
                mean = torch.tensor(curves).mean(0)  # cpu: for matplotlib
                ax.plot(range(len(mean)), mean, marker="o" if method == "maml" else ".",
                        label=f"{method}, step {lr} ({len(curves)} seeds)")
        ax.set_title(f"K={k}: 600 test tasks")
        ax.set_xlabel("gradient steps at test time")
        ax.set_ylabel("mean squared error")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / "maml_sinusoid_mse_vs_steps.png", dpi=100, bbox_inches="tight")


if __name__ == "__main__":
    main()
