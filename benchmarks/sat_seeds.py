"""Seed and device sweep of the shapes captioning recipes (issue 15): each variant x seeds 0, 1, 2.

    OUT=benchmarks/results python benchmarks/sat_seeds.py [variant,variant,...]

Every run is `zoo.train` + `zoo.evaluate` of its last checkpoint in its own process with one torch
thread, all in parallel (meant for a machine with many cores and a GPU; variants name their
accelerator). Writes $OUT/sat_seeds.json with every run, failures included (rc, stderr tail).
"""

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

OUT = Path(os.environ.get("OUT", "benchmarks/results"))
CHILD = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
from zoo.train import train
from zoo.evaluate import evaluate
t0 = time.time()
r = train(sys.argv[1:])
fit = time.time() - t0
m = evaluate(str(r.run_dir / "checkpoints" / "last.ckpt"))
print("BENCH", json.dumps({"fit_s": fit, **m}))
"""
HARD_LONG = ["trainer.max_epochs=12", "model.expected_context_hold=1200", "model.expected_context_anneal=600"]
RLOO = ["model.score_cost=sum", "model.estimator={name: rloo, n: 4, entropy_weight: 0.002}"]
COS = ["model.lr_schedule=cosine"]
VARIANTS = {
    "soft_cos_gpu": ("sat_shapes_soft", "gpu", COS),
    "soft_long_cos_gpu": ("sat_shapes_soft", "gpu", COS + ["trainer.max_epochs=12"]),
    "hard_long_cos_gpu": ("sat_shapes_hard", "gpu", COS + HARD_LONG),
    "hard_long_rloo4_cos_gpu": ("sat_shapes_hard", "gpu", COS + HARD_LONG + RLOO),
    "hard_gpu": ("sat_shapes_hard", "gpu", []),
    "hard_cpu": ("sat_shapes_hard", "cpu", []),
    "hard_rloo4_gpu": ("sat_shapes_hard", "gpu", RLOO),
    "hard_long_gpu": ("sat_shapes_hard", "gpu", HARD_LONG),
    "hard_long_rloo4_gpu": ("sat_shapes_hard", "gpu", HARD_LONG + RLOO),
    "soft_gpu": ("sat_shapes_soft", "gpu", []),
    "soft_long_gpu": ("sat_shapes_soft", "gpu", ["trainer.max_epochs=12"]),
}
only = sys.argv[1].split(",") if len(sys.argv) > 1 else list(VARIANTS)
seeds = [0, 1, 2]
jobs = [(v, s) for v in only for s in seeds]


def run(job):
    v, seed = job
    recipe, acc, extra = VARIANTS[v]
    args = [f"recipe={recipe}", f"seed={seed}", f"trainer.accelerator={acc}",
            f"run_dir=/tmp/runs/{v}_{seed}", "trainer.enable_progress_bar=false", *extra]
    t0 = time.time()
    p = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    row = {"variant": v, "seed": seed, "device": acc, "args": args, "wall_s": time.time() - t0, "rc": p.returncode}
    for line in p.stdout.splitlines():
        if line.startswith("BENCH "):
            row.update(json.loads(line[6:]))
    if p.returncode:
        row["error"] = p.stderr[-2000:]
    shown = ("variant", "seed", "rc", "wall_s", "test/bleu4", "test/att_localisation")
    print(json.dumps({k: row.get(k) for k in shown}), flush=True)
    return row


with ThreadPoolExecutor(len(jobs)) as ex:
    rows = list(ex.map(run, jobs))
OUT.mkdir(parents=True, exist_ok=True)
(OUT / "sat_seeds.json").write_text(json.dumps(rows, indent=1))
