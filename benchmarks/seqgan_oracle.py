"""SeqGAN's synthetic-data experiment: NLL-oracle of random, MLE and SeqGAN generators on one oracle.

    python benchmarks/seqgan_oracle.py --oracle /work/shared/data/seqgan_oracle_lantaoyu.npz [--device cuda]
    python benchmarks/seqgan_oracle.py --oracle ... --seeds 0 1 2 --out benchmarks/results/seqgan_oracle_seeds.json
    python benchmarks/seqgan_oracle.py --merge seed0.json seed1.json seed2.json --out ...  # seeds run apart

1. MLE pre-training of G for --mle-epochs epochs (the zoo's `seqgan` module, MLE phase only).
2. From that G, in parallel (one process each):
   - "MLE": --adv-iterations more MLE epochs (same total epochs as SeqGAN, as in the paper's Figure 2);
   - "SeqGAN": D pre-training, then --adv-iterations adversarial iterations (1 G step + D rounds).
3. NLL-oracle (10,000 samples) of: the untrained G, G after pre-training, MLE, SeqGAN; the oracle's
   own samples (floor). Prints a table, writes benchmarks/results/seqgan_oracle.json.

The defaults are a scaled schedule for a shared 2-core CPU (see SCALED below, printed and saved);
`--paper` runs the paper's counts (hours to days on a CPU).
Paper (Yu et al. 2017, Table 1, their oracle): random 10.310, MLE 9.038, SeqGAN 8.736.
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.common.devices import accelerator, add_device_option, describe, processor, resolve_device  # noqa: E402
from benchmarks.common.seqgan_merge import PAPER_RESULTS, merged, over_seeds  # noqa: E402

PAPER = {
    "mle_epochs": 120,
    "d_pretrain_rounds": 50,
    "d_pretrain_epochs": 3,
    "adv_iterations": 200,
    "adv_d_rounds": 5,
    "adv_d_epochs": 3,
    "dis_scale": 1.0,
    "num_negatives": 10000,
    "dis_lr": 1e-4,
}
# a shared 2-core CPU: fewer epochs everywhere, a quarter of D's filters, half the negatives per
# D round, and D's learning rate x10 to make up for its 15x fewer pre-training epochs
SCALED = {
    "mle_epochs": 40,
    "d_pretrain_rounds": 10,
    "d_pretrain_epochs": 1,
    "adv_iterations": 40,
    "adv_d_rounds": 1,
    "adv_d_epochs": 1,
    "dis_scale": 0.25,
    "num_negatives": 5000,
    "dis_lr": 1e-3,
}


def model_cfg(args: argparse.Namespace, **over) -> dict:
    from zoo.models.seqgan.config import PAPER_COUNTS

    cfg = {
        "mle_epochs": 0,
        "d_pretrain_rounds": 0,
        "d_pretrain_epochs": 1,
        "adv_iterations": 0,
        "adv_d_rounds": args.adv_d_rounds,
        "adv_d_epochs": args.adv_d_epochs,
        "rollouts": args.rollouts,
        "dis_num_filters": [max(1, round(n * args.dis_scale)) for n in PAPER_COUNTS],
        "eval_samples": args.curve_samples,
        "test_samples": args.eval_samples,
        "num_negatives": args.num_negatives,
        "dis_lr": args.dis_lr,
        "estimator": {"name": "reinforce", "baseline": args.baseline},
    }
    cfg.update(over)
    return cfg


def datamodule(args: argparse.Namespace):
    from zoo.models.seqgan.data import OracleData

    dm = OracleData(
        {
            "oracle_params": args.oracle,
            "seed": args.seed,
            "num_val": 256,
            "num_test": 256,
            "vocab_size": args.vocab_size,
            "num_train": args.num_train,
        }
    )
    dm.setup("fit")
    return dm


def fit(model, dm, epochs: int, name: str = "", device: str = "cpu") -> float:
    import lightning as L

    class Progress(L.Callback):
        """One line per epoch: phase, NLL-oracle of the current G, elapsed time."""

        def on_validation_end(self, trainer, module):
            value = trainer.callback_metrics.get("val/nll_oracle")
            phase = module.schedule.phase(trainer.current_epoch).kind
            print(f"[{name}] epoch {trainer.current_epoch} {phase}: val/nll_oracle {float(value):.3f} "
                  f"({time.time() - t0:.0f}s)", flush=True)

    t0 = time.time()
    acc, devices = accelerator(torch.device(device))
    trainer = L.Trainer(
        accelerator=acc,
        devices=devices,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        max_epochs=epochs,
        num_sanity_val_steps=0,
        callbacks=[Progress()],
    )
    trainer.fit(model, datamodule=dm)
    return time.time() - t0


def stage(name: str, args: argparse.Namespace, pretrained: dict | None, out: dict) -> None:
    """Run one stage in this process; results go to out[name] (a multiprocessing dict)."""
    import lightning as L

    from zoo.models.seqgan.module import SeqGAN
    from zoo.models.seqgan.oracle import nll_oracle

    torch.set_num_threads(args.threads)
    L.seed_everything(args.seed + {"pretrain": 0, "mle": 1, "seqgan": 2}[name], verbose=False)
    dm = datamodule(args)
    if name == "pretrain":
        model = SeqGAN(model_cfg(args, mle_epochs=args.mle_epochs), dm.info())
        random_g = copy.deepcopy(model.gen)
        seconds = fit(model, dm, args.mle_epochs, name, args.device)
        n = args.eval_samples
        out[name] = {
            "seconds": seconds,
            "history": model.history,
            "gen": {k: v.cpu() for k, v in model.gen.state_dict().items()},
            "random": nll_oracle(dm.oracle, random_g, n, 20, args.seed + 11),
            "pretrained": nll_oracle(dm.oracle, model.gen, n, 20, args.seed + 12),
            "floor": nll_oracle(dm.oracle, dm.oracle, n, 20, args.seed + 13),
        }
        return
    if name == "mle":
        cfg, epochs = model_cfg(args, mle_epochs=args.adv_iterations), args.adv_iterations
    else:
        cfg = model_cfg(
            args,
            d_pretrain_rounds=args.d_pretrain_rounds,
            d_pretrain_epochs=args.d_pretrain_epochs,
            adv_iterations=args.adv_iterations,
        )
        epochs = SeqGAN(cfg, dm.info()).schedule.total
    model = SeqGAN(cfg, dm.info())
    model.gen.load_state_dict(pretrained)
    seconds = fit(model, dm, epochs, name, args.device)
    out[name] = {
        "seconds": seconds,
        "history": model.history,
        "final": nll_oracle(dm.oracle, model.gen, args.eval_samples, 20, args.seed + 14),
    }


def one_seed(args: argparse.Namespace, device: torch.device, schedule: dict) -> dict:
    """Pre-training, then MLE and SeqGAN from the same G (in parallel processes), for args.seed."""
    t0 = time.time()
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        out = manager.dict()
        stage("pretrain", args, None, out)
        pre = dict(out["pretrain"])
        print(f"pre-training done in {pre['seconds']:.0f}s: NLL-oracle {pre['pretrained']:.3f}", flush=True)
        procs = [ctx.Process(target=stage, args=(name, args, pre["gen"], out)) for name in ("mle", "seqgan")]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        results = {k: dict(v) for k, v in out.items()}
    if "mle" not in results or "seqgan" not in results:
        raise SystemExit("a stage failed (see its traceback above)")
    mle, seq = results["mle"], results["seqgan"]
    methods = {
        "oracle (floor)": pre["floor"],
        "random G": pre["random"],
        "MLE pre-trained (start)": pre["pretrained"],
        "MLE": mle["final"],
        "SeqGAN": seq["final"],
    }
    print(f"\nNLL-oracle ({args.eval_samples} samples, per token; lower is better)")
    print(f"{'method':<26}{'ours':>9}{'paper':>9}")
    for name, value in methods.items():
        ref = {"random G": "random", "MLE": "mle", "SeqGAN": "seqgan"}.get(name)
        print(f"{name:<26}{value:>9.3f}{f'{PAPER_RESULTS[ref]:.3f}' if ref else '-':>9}")
    verdict = "below" if seq["final"] < mle["final"] else "NOT below"
    print(
        f"SeqGAN ends {verdict} MLE: {seq['final']:.3f} vs {mle['final']:.3f} "
        f"(paper: 8.736 vs 9.038); total {time.time() - t0:.0f}s"
    )
    report = {
        "oracle": args.oracle or f"seeded N(0,1) oracle, seed {args.seed}",
        "schedule": schedule,
        "paper_schedule": PAPER,
        "scaled": not args.paper,
        "rollouts": args.rollouts,
        "eval_samples": args.eval_samples,
        "nll_oracle": methods,
        "paper_nll_oracle": PAPER_RESULTS,
        "seqgan_below_mle": seq["final"] < mle["final"],
        "seconds": {
            "pretrain": pre["seconds"],
            "mle": mle["seconds"],
            "seqgan": seq["seconds"],
            "total": time.time() - t0,
        },
        "curves": {"pretrain": pre["history"], "mle": mle["history"], "seqgan": seq["history"]},
        "threads_per_process": args.threads,
        "device": args.device, "machine": processor(),
        "device_name": describe(device),
        "seed": args.seed,
        "command": "python " + " ".join(sys.argv),
        "torch": torch.__version__,
    }
    return report


def main() -> None:
    from zoo.tracking import quiet_lightning

    quiet_lightning()  # the Trainers built here: no cloud tip, no LeafSpec warning
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--oracle", default=None, help=".npz oracle (default: a seeded N(0,1) oracle)")
    p.add_argument("--paper", action="store_true", help="the paper's schedule instead of the scaled one")
    for key, value in SCALED.items():
        p.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=None)
    p.add_argument("--rollouts", type=int, default=16)
    p.add_argument("--eval-samples", type=int, default=10000, help="samples for the final NLL-oracle numbers")
    p.add_argument("--curve-samples", type=int, default=2000, help="samples per point of the learning curves")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="one full experiment per seed")
    p.add_argument("--baseline", default="none", help="REINFORCE baseline (the paper: none)")
    p.add_argument("--vocab-size", type=int, default=5000, help="seeded oracle's vocabulary (no --oracle)")
    p.add_argument("--num-train", type=int, default=10000, help="training sequences sampled from the oracle")
    p.add_argument(
        "--threads", type=int, default=1, help="torch threads per process (2 processes in stage 2)"
    )
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "seqgan_oracle.json"))
    p.add_argument("--merge", nargs="+", metavar="JSON", help="combine single-seed reports, train nothing")
    add_device_option(p)
    args = p.parse_args()
    if args.merge:
        report = merged(args.merge)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.out}")
        return
    device = resolve_device(args.device)
    args.device = str(device)
    base = PAPER if args.paper else SCALED
    for key, value in base.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    schedule = {k: getattr(args, k) for k in base}
    print(f"schedule ({'paper' if args.paper else 'scaled'}): {schedule}; paper: {PAPER}", flush=True)

    runs = []
    for seed in args.seeds:
        args.seed = seed
        runs.append(one_seed(args, device, schedule))
    report = runs[0] if len(runs) == 1 else over_seeds(runs, schedule)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
