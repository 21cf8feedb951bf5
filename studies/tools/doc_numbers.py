"""Small measurements behind numbers in docs/ that had no record (each writes one JSON to --out).

    python studies/tools/doc_numbers.py dscore [--repeats 7]            # docs/seqgan.md: D's lookup tables
    python studies/tools/doc_numbers.py threads [--repeats 5]           # docs/seqgan.md, docs/vae.md: 1 vs 2 threads
    python studies/tools/doc_numbers.py sat-card --commit bd94c97       # docs/captioning.md: an old hard card

dscore: SeqGAN's discriminator at the paper's sizes (V 5,000, T 20, emb 64, 1,720 filters), one
torch thread: the time to build its lookup tables (``Discriminator.lookup_tables``, cache cleared
each time) and to score 4,096 sequences with them (``prob_real``) vs with the convolutions
(``sigmoid(D(x))``), interleaved, medians of --repeats after one warm-up.

threads: one training step of (a) SeqGAN's MLE phase at the paper's sizes (G 32/32, V 5,000,
batch 64, T 20, Adam 0.01, clip 5) and (b) the `vae_digits` recipe (a plain loop over its model's
training_step, as benchmarks/overhead.py's), with 1 and 2 torch threads, on the machine as it is
and with N extra busy single-threaded processes (`--busy`) competing for the 2 cores; per setting
the median over --repeats blocks of the per-step median of --steps steps.

sat-card: the `sat-shapes-hard` card of a past commit (read from git, built with today's code),
on its own test split: test metrics with `hard_decode` argmax (the card's) and expected, and the
distinct attended cells per caption of a multi-object scene (as tests/captioning/test_captioning_pretrained.py
counts them), over the whole split and over its first 100 scenes (the test's).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def machine() -> dict:
    from benchmarks.common.devices import processor

    return {"processor": processor(), "nproc": os.cpu_count(), "torch": torch.__version__,
            "python": platform.python_version(), "loadavg_at_start": open("/proc/loadavg").read().split()[:3]}


# ---- dscore --------------------------------------------------------------------------------------
def dscore(args) -> dict:
    from zoo.models.seqgan.nets import Discriminator

    torch.set_num_threads(1)
    torch.manual_seed(0)
    sizes = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20]
    counts = [100, 200, 200, 200, 200, 100, 100, 100, 100, 100, 160, 160]
    d = Discriminator(5000, 20, 64, tuple(sizes), tuple(counts), 0.25).eval()
    seqs = torch.randint(0, 5000, (args.sequences, 20))  # cpu: a timing of this CPU
    times: dict[str, list[float]] = {"build_tables": [], "score_lookup": [], "score_conv": []}
    with torch.no_grad():
        for r in range(args.repeats + 1):
            d._tables = None
            t0 = time.perf_counter()
            tables = d.lookup_tables()
            t1 = time.perf_counter()
            p_lookup = d.prob_real(seqs)  # tables cached: scoring alone
            t2 = time.perf_counter()
            p_conv = torch.cat([torch.sigmoid(d(part)) for part in seqs.split(4096)])
            t3 = time.perf_counter()
            if r:  # the first round is the warm-up
                times["build_tables"].append(t1 - t0)
                times["score_lookup"].append(t2 - t1)
                times["score_conv"].append(t3 - t2)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"what": "SeqGAN discriminator at the paper's sizes, one torch thread: lookup-table build time and "
                    f"scoring {args.sequences} sequences with the tables (prob_real) vs the convolutions",
            "sequences": args.sequences, "repeats": args.repeats, "warmup": 1,
            "table_mb": sum(t.numel() * t.element_size() for t in tables) / 2**20,
            "median_seconds": med, "seconds": times,
            "conv_over_lookup": med["score_conv"] / med["score_lookup"],
            "max_abs_prob_diff": float((p_lookup - p_conv).abs().max())}


# ---- threads -------------------------------------------------------------------------------------
def seqgan_mle_step():
    from zoo.models.seqgan.nets import LSTMLM

    torch.manual_seed(0)
    g = LSTMLM(5000, 32, 32).init_normal(0.1)
    opt = torch.optim.Adam(g.parameters(), lr=0.01)
    batch = torch.randint(0, 5000, (64, 20))  # cpu: a timing of this CPU

    def step():
        loss = -g.log_prob(batch).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(g.parameters(), 5.0)
        opt.step()
    return step


def vae_digits_step():
    import lightning as L

    from zoo.config import load_config
    from zoo.train import build

    cfg = load_config("vae_digits", ["seed=0"])
    L.seed_everything(0, verbose=False)
    datamodule, model = build(cfg)
    datamodule.setup("fit")
    model.log = model.log_dict = lambda *a, **k: None
    optimizer = model.configure_optimizers()
    batches = list(datamodule.train_dataloader())
    model.train()
    state = {"i": 0}

    def step():
        i = state["i"] % len(batches)
        state["i"] += 1
        loss = model.training_step(batches[i], i)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return step


def threads(args) -> dict:
    warnings.filterwarnings("ignore")
    workloads = {"seqgan_mle_step_paper": seqgan_mle_step(), "vae_digits_step": vae_digits_step()}
    blocks: dict[str, list[float]] = {}
    for busy in args.busy:
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
        try:
            time.sleep(0.5)
            for _ in range(args.repeats):  # interleaved: load changes hit every setting alike
                for name, step in workloads.items():
                    for n in (1, 2):
                        torch.set_num_threads(n)
                        for _ in range(3):
                            step()  # warm-up at this thread count
                        ts = []
                        for _ in range(args.steps):
                            t0 = time.perf_counter()
                            step()
                            ts.append(time.perf_counter() - t0)
                        blocks.setdefault(f"{name} threads={n} busy={busy}", []).append(statistics.median(ts))
        finally:
            for p in spinners:
                p.kill()
                p.wait()
    med = {k: statistics.median(v) for k, v in blocks.items()}
    ratios = {f"{name} busy={busy}": med[f"{name} threads=2 busy={busy}"] / med[f"{name} threads=1 busy={busy}"]
              for name in workloads for busy in args.busy}
    return {"what": "one training step with 1 vs 2 torch threads, with N extra busy single-threaded processes on the "
                    "2 cores: SeqGAN's MLE step at the paper's sizes, a vae_digits step (plain loop)",
            "steps_per_block": args.steps, "repeats": args.repeats, "busy_processes": args.busy,
            "median_step_seconds": med, "block_medians": blocks, "two_over_one_thread": ratios,
            "loadavg_at_end": open("/proc/loadavg").read().split()[:3]}


# ---- sat-card ------------------------------------------------------------------------------------
def sat_card(args) -> dict:
    import lightning as L
    from safetensors.torch import load_file

    from zoo.loading import build_model
    from zoo.models.captioning import decode as D
    from zoo.registry import DATAMODULES
    from zoo.schema import validate

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    card = json.loads(subprocess.check_output(["git", "show", f"{args.commit}:zoo/pretrained/sat-shapes-hard.json"],
                                              cwd=ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        weights = Path(tmp) / "w.safetensors"
        weights.write_bytes(subprocess.check_output(["git", "show", f"{args.commit}:zoo/pretrained/{card['weights']}"],
                                                    cwd=ROOT))
        model = build_model(card["model"], card["hyper_parameters"], load_file(str(weights)), "git card")
    data_cfg = dict(card["data"])
    entry = DATAMODULES.entry(data_cfg.pop("name"))
    out = {"what": f"the sat-shapes-hard card of commit {args.commit} (its test split, {data_cfg['n_test']} scenes), "
                   "built with today's code: test metrics with hard_decode argmax and expected, and distinct attended "
                   "cells per caption of a multi-object scene",
           "card_metrics": card["metrics"], "card_created": card.get("created"), "decode": {}}
    for mode in ("argmax", "expected"):
        model.decode_mode = mode
        datamodule = entry.obj(validate(entry.config, dict(data_cfg), "card data") if entry.config else data_cfg)
        datamodule.prepare_data()
        datamodule.setup("test")
        L.seed_everything(card.get("seed", 0), verbose=False)
        with tempfile.TemporaryDirectory() as tmp:
            model.plots_dir = Path(tmp)
            trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False)
            metrics = {k: float(v) for k, v in trainer.test(model, datamodule=datamodule, verbose=False)[0].items()}
        cells, first_100, scene = [], [], 0
        model.eval()
        with torch.inference_mode():
            for b in datamodule.test_dataloader():  # in order: scene i is the generator's i-th test scene
                res, feats, grid = model.generate(b["image"], k=1)
                seqs = res.sequences[:, 0]
                _, used = D.attention_of(model.decoder, feats, seqs, model.decode_mode, model.vocab.start)
                words = D.caption_mask(seqs, model.vocab.end)
                for i in range(len(seqs)):
                    if (b["obj_words"][i, :, 0] >= 0).sum() > 1:
                        cells.append(used[i][words[i]].argmax(-1).unique().numel())
                        if scene < 100:  # the scenes tests/captioning/test_captioning_pretrained.py uses
                            first_100.append(cells[-1])
                    scene += 1
        metrics["distinct_cells_per_multi_object_caption"] = sum(cells) / len(cells)
        metrics["multi_object_captions"] = len(cells)
        metrics["distinct_cells_first_100_scenes"] = sum(first_100) / len(first_100)
        metrics["multi_object_captions_first_100_scenes"] = len(first_100)
        out["decode"][mode] = metrics
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("dscore")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--sequences", type=int, default=4096)
    p = sub.add_parser("threads")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--busy", type=int, nargs="+", default=[0, 1])
    p = sub.add_parser("sat-card")
    p.add_argument("--commit", default="bd94c97")
    for p in sub.choices.values():
        p.add_argument("--out", required=True)
    args = parser.parse_args()
    info = {"command": "python " + " ".join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]]),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": machine()}
    t0 = time.perf_counter()
    result = {"dscore": dscore, "threads": threads, "sat-card": sat_card}[args.what](args)
    record = {**{"what": result.pop("what")}, **info, **result, "wall_s": round(time.perf_counter() - t0, 1)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k not in ("seconds", "block_medians")}, indent=1))


if __name__ == "__main__":
    main()
