"""The discrete VAE (20 x 10 categorical latents) on the digits, trained with each categorical
estimator of the registry under the same budget of optimizer steps.

    python benchmarks/dvae_estimators.py                    # 3 seeds, ~15 minutes on one CPU core
    python benchmarks/dvae_estimators.py --steps 300 --estimators gumbel_softmax rloo   # quick look
    python benchmarks/dvae_estimators.py --device cuda      # on a GPU
    python benchmarks/dvae_estimators.py --recipe dvae_digits_binary   # binary latents: arm, disarm too
    python benchmarks/dvae_estimators.py --extra model.n_latents=1 --out benchmarks/results/dvae_1x10_estimators.json
                                          # one latent variable: expectation (exact), unordered_set too

For every estimator it reports
- the final test negative ELBO (exact categorical draws, nats per image) and IWAE nll (k=100);
- the gradient variance of the encoder during its own training (GradientVarianceCallback: M
  repeated estimates on one batch, per-parameter variance averaged over parameters, mean over
  the probes), and at one shared point: every estimator's M estimates on the same batch at the
  same weights (the gumbel_softmax run's final weights), with the cosine between each estimator's
  mean gradient and an unbiased reference (the mean of many RLOO estimates) to show the bias of
  the relaxed estimators;
- training time per optimizer step (forward + backward + Adam; probes and validation excluded).
Every estimator is trained with each of ``--seeds`` (model initialisation and sampling; the digits'
split is fixed); the table gives mean ± sd over the seeds, the JSON every run. The shared-point
comparison uses the first seed's Gumbel-softmax weights. Prints a table and writes JSON to
benchmarks/results/dvae_estimators.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import lightning as L
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.common.devices import accelerator, add_device_option, describe, resolve_device, synchronize  # noqa: E402
from zoo.spread import fmt, paired, spread  # noqa: E402

ESTIMATORS = {  # label -> estimator spec for model.estimator
    "gumbel_softmax": {"name": "gumbel_softmax", "tau": 1.0, "tau_min": 0.5, "anneal_rate": 1.0e-3},
    "straight_through": {"name": "straight_through", "tau": 1.0},
    "reinforce_ema": {"name": "reinforce", "baseline": "ema", "decay": 0.9},
    "reinforce_learned": {"name": "reinforce", "baseline": "learned", "hidden": 128},
    "rloo_4": {"name": "rloo", "n": 4},
    "relax": {"name": "relax"},
    "relax_4": {"name": "relax", "n": 4},
    "relax_rebar": {"name": "relax", "rebar": True},  # + REBAR's eta * f(softmax(z / tau)) in the control variate
    "rloo_2": {"name": "rloo", "n": 2},  # binary latents: 2 cost evaluations, as arm and disarm
    "arm": {"name": "arm"},
    "disarm": {"name": "disarm"},
    "disarm_4": {"name": "disarm", "n": 4},
    "expectation": {"name": "expectation"},  # one latent (model.n_latents=1): the exact gradient, K evaluations
    "unordered_set_2": {"name": "unordered_set", "n": 2},  # one latent: 2 distinct categories, built-in baseline
    "unordered_set_4": {"name": "unordered_set", "n": 4},
}
CATEGORICAL = ["gumbel_softmax", "straight_through", "reinforce_ema", "reinforce_learned", "rloo_4", "relax",
               "relax_4", "relax_rebar"]  # the default set for categorical latents (K > 2)
BINARY = ["gumbel_softmax", "straight_through", "reinforce_ema", "rloo_2", "arm", "disarm", "relax", "rloo_4",
          "disarm_4", "relax_rebar"]  # the default set for binary latents (the recipe's n_classes = 2)
SINGLE = ["gumbel_softmax", "straight_through", "reinforce_ema", "rloo_2", "unordered_set_2", "rloo_4",
          "unordered_set_4", "expectation"]  # the default set for one latent variable (--extra model.n_latents=1)


class StepTimer(L.Callback):
    """Wall time of the training steps only (batch start -> batch end, before other probes run)."""

    def __init__(self):
        self.total, self.steps, self._t0 = 0.0, 0, 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        synchronize(pl_module.device)
        self._t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        synchronize(pl_module.device)
        self.total += time.perf_counter() - self._t0
        self.steps += 1


def train_one(label: str, spec: dict, seed: int, args) -> tuple[dict, object, object]:
    from zoo.callbacks.grad_variance import GradientVarianceCallback
    from zoo.config import load_config
    from zoo.train import build

    cfg = load_config(args.recipe, [*args.extra, f"seed={seed}", f"model.iwae_samples={args.iwae}",
                                    f"model.estimator={json.dumps(spec)}"])  # a name or {name: ..., options}
    L.seed_everything(seed, verbose=False)
    datamodule, model = build(cfg)
    model.plots_dir = Path(args.plots) / label
    timer = StepTimer()
    probe = GradientVarianceCallback(every_n_steps=max(1, args.steps // args.probes), repeats=args.repeats)
    acc, devices = accelerator(args.device)
    trainer = L.Trainer(accelerator=acc, devices=devices, max_steps=args.steps, max_epochs=-1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        check_val_every_n_epoch=10, num_sanity_val_steps=0, callbacks=[timer, probe])
    trainer.fit(model, datamodule=datamodule)
    test = trainer.test(model, datamodule=datamodule, verbose=False)[0]
    variances = [h["grad_var"] for h in probe.history]
    row = {
        "estimator": label, "seed": seed, "spec": spec, "steps": trainer.global_step,
        "test_neg_elbo": test["test/loss"], "test_iwae_nll": test["test/iwae_nll"],
        "test_kl": test["test/kl"],
        "grad_var_mean": sum(variances) / len(variances), "grad_var_last": variances[-1],
        "grad_snr_last": probe.history[-1]["grad_snr"], "grad_var_history": probe.history,
        "ms_per_step": 1000 * timer.total / max(timer.steps, 1),
    }
    return row, model, datamodule


def shared_point(model, datamodule, args) -> dict:
    """Every estimator's gradient on one batch at the same weights: variance (``args.repeats``
    estimates) and the cosine between the mean of ``args.shared_repeats`` estimates and an unbiased
    reference gradient (the mean of ``args.reference`` RLOO(n=8) estimates; with one latent variable the
    exact gradient, from ``expectation``). An unbiased estimator's cosine tends to 1 as the repeats grow;
    a biased one's stays below."""
    from zoo.callbacks.grad_variance import GradientVarianceCallback
    from zoo.estimators import get_estimator

    batch = next(iter(datamodule.val_dataloader()))
    model.to(args.device)
    batch = (batch[0][:64].to(args.device), batch[1][:64].to(args.device))
    params = model.estimator_parameters()
    original = model.estimator

    def mean_grad(n: int) -> torch.Tensor:
        total = None
        for _ in range(n):
            g = torch.autograd.grad(model.estimator_loss(batch), params, allow_unused=True)
            g = [x if x is not None else torch.zeros_like(p) for x, p in zip(g, params)]
            flat = torch.cat([x.flatten() for x in g])
            total = flat if total is None else total + flat
        return total / n

    out = {}
    model.train()  # baselines update in training mode only
    torch.manual_seed(args.seeds[0])
    model.estimator = get_estimator({"name": "expectation"} if args.exact_reference else {"name": "rloo", "n": 8})
    reference = mean_grad(1 if args.exact_reference else args.reference)
    probe = GradientVarianceCallback(repeats=args.repeats)
    for label, spec in ESTIMATORS.items():
        if label not in args.estimators:
            continue
        model.estimator = get_estimator(spec)
        if any(p.requires_grad for p in model.estimator.parameters()):
            continue  # a learned baseline or control variate: untrained at this point, not comparable
        if spec["name"] == "gumbel_softmax":
            model.estimator.set_step(args.steps)  # the run's final temperature
        with torch.no_grad():  # let a moving-average baseline reach the current mean cost
            for _ in range(50):
                model.estimator_loss(batch)
        torch.manual_seed(args.seeds[0])
        stats = probe.measure(model, batch)
        cos = torch.nn.functional.cosine_similarity(mean_grad(args.shared_repeats), reference, dim=0).item()
        out[label] = {"grad_var": stats["grad_var"], "grad_snr": stats["grad_snr"], "cosine_to_unbiased": cos}
    model.estimator = original
    return out


def main() -> None:
    from zoo.tracking import quiet_lightning

    quiet_lightning()  # the Trainers built here: no cloud tip, no LeafSpec warning
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--steps", type=int, default=2000, help="optimizer steps per estimator (batch 64)")
    p.add_argument("--recipe", default="dvae_digits", help="a dvae recipe (dvae_digits_binary: binary latents)")
    p.add_argument("--extra", nargs="*", default=[], help="key=value overrides of the recipe for every run "
                   "(model.n_latents=1: one latent variable, where expectation and unordered_set fit)")
    p.add_argument("--estimators", nargs="+", choices=list(ESTIMATORS),
                   help="labels to train (default: every one that fits the recipe's latents)")
    p.add_argument("--repeats", type=int, default=32, help="gradient estimates per variance probe")
    p.add_argument("--probes", type=int, default=5, help="variance probes during training")
    p.add_argument("--reference", type=int, default=1000, help="RLOO(n=8) estimates: reference gradient")
    p.add_argument("--shared-repeats", type=int, default=256, help="estimates averaged for each cosine")
    p.add_argument("--iwae", type=int, default=100, help="k of the test IWAE estimate")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one training run per seed")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (tiny nets: 1 is fastest)")
    p.add_argument("--plots", default=str(ROOT / "runs" / "dvae_estimators"), help="the runs' figures")
    p.add_argument("--out", help="JSON path (default benchmarks/results/dvae_estimators.json, "
                   "dvae_binary_estimators.json for dvae_digits_binary)")
    add_device_option(p)
    args = p.parse_args()
    from zoo.config import load_config

    model_cfg = load_config(args.recipe, args.extra)["model"]
    binary = model_cfg["n_classes"] == 2
    args.exact_reference = model_cfg["n_latents"] == 1  # one latent: the gradient is a sum over its K classes
    args.estimators = args.estimators or (SINGLE if args.exact_reference else BINARY if binary else CATEGORICAL)
    args.out = args.out or str(ROOT / "benchmarks" / "results" / f"{args.recipe.replace('dvae_digits', 'dvae')}"
                                                                   "_estimators.json")
    args.device = resolve_device(args.device)
    torch.set_num_threads(args.threads)

    rows, shared, start = [], {}, time.time()
    for seed in args.seeds:
        for label in args.estimators:
            t0 = time.time()
            row, model, datamodule = train_one(label, ESTIMATORS[label], seed, args)
            row["wall_s"] = time.time() - t0
            rows.append(row)
            print(f"seed {seed} {label}: test -ELBO {row['test_neg_elbo']:.2f} ({row['wall_s']:.0f} s)", flush=True)
            if seed == args.seeds[0] and (label == "gumbel_softmax" or (not shared and label == args.estimators[-1])):
                shared = shared_point(model, datamodule, args)

    summary = {}
    for label in args.estimators:
        mine = [r for r in rows if r["estimator"] == label]
        summary[label] = {key: spread([r[key] for r in mine])
                          for key in ("test_neg_elbo", "test_iwae_nll", "test_kl", "grad_var_mean")}
        summary[label]["ms_per_step_median"] = sorted(r["ms_per_step"] for r in mine)[len(mine) // 2]
    best = min(args.estimators, key=lambda k: summary[k]["test_neg_elbo"]["mean"])
    by_seed = {k: [r["test_neg_elbo"] for r in rows if r["estimator"] == k] for k in args.estimators}
    versus_best = {k: paired(by_seed[k], by_seed[best]) for k in args.estimators if k != best}

    head = (f"{'estimator':<18} {'test -ELBO':>13} {'IWAE nll':>13} {'KL':>11} {'grad var (train)':>17} "
            f"{'grad var (shared)':>18} {'cos to unbiased':>15} {'ms/step':>8}")
    lines = [head, "-" * len(head)]
    for label in args.estimators:
        m, s = summary[label], shared.get(label, {})
        var_s = f"{s['grad_var']:.3e}" if s else "-"
        cos = f"{s['cosine_to_unbiased']:.3f}" if s else "-"
        lines.append(f"{label:<18} {fmt(m['test_neg_elbo']):>13} {fmt(m['test_iwae_nll']):>13} "
                     f"{fmt(m['test_kl']):>11} {m['grad_var_mean']['mean']:>17.3e} {var_s:>18} {cos:>15} "
                     f"{m['ms_per_step_median']:>8.2f}")
    lines.append(f"\ntest -ELBO minus the best ({best}), paired by seed: " + "; ".join(
        f"{k} {d['mean']:+.2f} (s.e. {d['se']:.2f})" if d["se"] is not None else f"{k} {d['mean']:+.2f}"
        for k, d in versus_best.items()))
    table = "\n".join(lines)
    print(f"\nDiscrete VAE {model_cfg['n_latents']}x{model_cfg['n_classes']} on digits ({args.recipe}), "
          f"{args.steps} steps of batch 64 per estimator, seeds {args.seeds} "
          f"(mean ± sd; nats per image; gradient variance of the encoder, mean per parameter; ms/step median)"
          f"\n{table}")
    result = {
        "benchmark": "dvae_estimators", "recipe": args.recipe, "extra": args.extra, "steps": args.steps,
        "batch_size": 64,
        "seeds": args.seeds,
        "repeats": args.repeats, "reference_estimates": 1 if args.exact_reference else args.reference,
        "shared_repeats": args.shared_repeats,
        "threads": args.threads, "device": str(args.device), "device_name": describe(args.device),
        "machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}",
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "total_s": time.time() - start, "summary": summary, "paired_vs_best": versus_best,
        "rows": rows, "shared_point": shared, "table": table,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
