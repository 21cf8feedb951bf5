"""SeqGAN's G steps at equal wall-clock time: the paper's reward (16 Monte Carlo rollouts per token, REINFORCE
without a baseline) against the rollout-free group baseline (4 sequences per start, each token rewarded with its
sequence's final D score, rloo's leave-one-out baseline). Study page: studies/2026-11-29-seqgan-group-vs-rollouts.md.

Per seed: the small oracle recipe, shortened, pre-trains G (MLE) and D with Lightning; then each arm starts from
those same weights and takes G steps (Adam at the recipe's adv_lr, the paper's rollout-net update) with D held
fixed, for the same seconds of G-step time (evaluations not counted; the arms alternate seeds, one torch thread).
Recorded: the oracle NLL of G (the paper's metric, 2,000 samples, fixed seed) and D's mean score on 2,000 samples of
G (the objective the G steps climb), at the start and after every few steps.

    OMP_NUM_THREADS=1 python studies/seqgan_group_vs_rollouts.py --seeds 0,1,2 --seconds 20
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
OUT = ROOT / "studies" / "results" / "seqgan_group_vs_rollouts.json"
PRETRAIN = ["model.mle_epochs=5", "model.d_pretrain_rounds=2", "model.adv_iterations=0", "data.num_train=1280",
            "model.eval_samples=200", "model.test_samples=200", "trainer.enable_progress_bar=false"]
ARMS = {  # the paper's reward, and the rollout-free group baseline
    "paper: reinforce, 16 rollouts, 1 sequence per start": ["model.estimator={name: reinforce, baseline: none}",
                                                            "model.rollouts=16", "model.group_size=1"],
    "rloo: 4 sequences per start, no rollouts": ["model.estimator=rloo", "model.rollouts=0", "model.group_size=4"],
}


def measure(model) -> dict:
    from zoo.models.seqgan.oracle import nll_oracle

    with torch.no_grad():
        nll = nll_oracle(model.oracle, model.gen, 2000, model.seq_len, 1234)
        seqs = model.sample_sequences(2000, 99)
        model.dis.eval()
        d = model.dis.prob_real(seqs).mean().item()
    return {"nll_oracle": nll, "d_score": d}


def run_arm(seed: int, overrides: list[str], state: dict, seconds: float, every: int) -> dict:
    from zoo.config import load_config
    from zoo.models.seqgan.rollout import update_rollout_net
    from zoo.train import build

    cfg = load_config("seqgan_oracle_small", [f"seed={seed}", *PRETRAIN, *overrides])
    L.seed_everything(seed, verbose=False)
    dm, model = build(cfg)
    model.load_state_dict(state, strict=False)  # G, D, oracle; the arm's own estimator state starts fresh
    model.start_adversarial()
    opt = torch.optim.Adam(list(model.gen.parameters()) + list(model.estimator.parameters()), lr=model.cfg.adv_lr)
    curve = [{"step": 0, "seconds": 0.0, **measure(model)}]
    spent, step = 0.0, 0
    while spent < seconds:
        t0 = time.perf_counter()
        model.dis.eval()
        loss, _ = model.g_loss(torch.Generator(device=model.device).manual_seed(seed * 100_000 + step))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.gen.parameters(), model.cfg.grad_clip)
        opt.step()
        update_rollout_net(model.rollout, model.gen, model.cfg.rollout_keep)
        spent += time.perf_counter() - t0
        step += 1
        if step % every == 0 or spent >= seconds:
            curve.append({"step": step, "seconds": round(spent, 2), **measure(model)})
    return {"steps": step, "seconds": round(spent, 2), "curve": curve, "final": curve[-1]}


def pretrain(seed: int) -> dict:
    from zoo.config import load_config
    from zoo.train import build

    cfg = load_config("seqgan_oracle_small", [f"seed={seed}", *PRETRAIN])
    L.seed_everything(seed, verbose=False)
    dm, model = build(cfg)
    trainer = L.Trainer(accelerator="cpu", max_epochs=-1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(model, datamodule=dm)
    return {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("estimator.")}


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.common.devices import add_device_option, describe, resolve_device
    from zoo.spread import paired, spread

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--seconds", type=float, default=20.0, help="G-step time per arm and seed")
    ap.add_argument("--every", type=int, default=5, help="measure after every this many G steps")
    ap.add_argument("--out", default=str(OUT))
    add_device_option(ap)
    args = ap.parse_args()
    device = resolve_device(args.device)
    if device.type != "cpu":  # the arms' wall-clock budgets were set for the CPU's step times
        raise SystemExit("seqgan_group_vs_rollouts.py times G steps on the CPU: --device cpu")
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    record = {"command": " ".join(["python", "studies/seqgan_group_vs_rollouts.py", *sys.argv[1:]]),
              "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}", "threads": 1,
              "device": str(device), "device_name": describe(device),
              "pretrain": PRETRAIN, "arms": {a: {"overrides": o, "runs": {}} for a, o in ARMS.items()}}
    for seed in seeds:
        state = pretrain(seed)
        names = list(ARMS) if seed % 2 == 0 else list(ARMS)[::-1]  # alternate which arm runs first
        for arm in names:
            record["arms"][arm]["runs"][seed] = run_arm(seed, ARMS[arm], state, args.seconds, args.every)
            Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    paper, group = (record["arms"][a]["runs"] for a in ARMS)
    for key in ("nll_oracle", "d_score"):
        record[f"{key}_start"] = spread([paper[s]["curve"][0][key] for s in seeds])
        for arm in ARMS:
            record["arms"][arm][key] = spread([record["arms"][arm]["runs"][s]["final"][key] for s in seeds])
        record[f"{key}_group_minus_paper"] = paired([group[s]["final"][key] for s in seeds],
                                                    [paper[s]["final"][key] for s in seeds])
    for arm in ARMS:
        record["arms"][arm]["steps"] = spread([record["arms"][arm]["runs"][s]["steps"] for s in seeds])
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "arms"}, indent=1))
    for arm in ARMS:
        print(arm, {k: record["arms"][arm][k] for k in ("nll_oracle", "d_score", "steps")})


if __name__ == "__main__":
    main()
