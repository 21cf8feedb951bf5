"""The minibatch path's step cap: the curvature it bounds steps by, sig'(s) at the score against
``path_curvature`` (1/4 for a score on the wrong side), on the planted corpus, per objective, with
and without subsampling, over seeds.

    python studies/skipgram_step_cap.py                       # 3 objectives x 2 samples x 3 seeds x 2 caps
    python studies/skipgram_step_cap.py --objectives nce --samples 0 --seeds 0,1,2,3,4

Every run is `zoo.train recipe=skipgram_synthetic model.updates=minibatch` (the GPU's path, here
on the CPU) in its own process; the sig'(s) variant replaces ``nets.path_curvature`` before
training. A run that diverges is kept with its message. Writes every run and the mean / sd of the
planted Spearman correlation per setting, and the paired difference (same seeds) of the two caps,
to studies/results/skipgram_step_cap.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import accelerator, add_device_option, describe, processor, resolve_device
from zoo.spread import fmt, paired, spread

ROOT = Path(__file__).resolve().parent.parent
CHILD = r"""
import json, sys
import torch
torch.set_num_threads(1)
from zoo.models.skipgram import nets
from zoo.train import train
if sys.argv[1] == "sig_prime":  # the cap before 2026-11-25: the curvature at the score itself
    nets.path_curvature = lambda g: g.abs() * (1 - g.abs())
try:
    m = train(sys.argv[2:]).test_metrics
    print("BENCH", json.dumps({k: float(v) for k, v in m.items()}))
except (SystemExit, Exception) as err:  # a diverged run stops with a message: kept as the row's error
    print("BENCH", json.dumps({"error": f"{type(err).__name__}: {err}"}))
"""
CAPS = ("path_curvature", "sig_prime")


def run(cap: str, objective: str, sample: float, seed: int, device, run_root: str) -> dict:
    acc, devices = accelerator(device)
    args = ["recipe=skipgram_synthetic", "model.updates=minibatch", f"model.objective={objective}",
            f"data.sample={sample}", f"seed={seed}", f"trainer.accelerator={acc}", f"trainer.devices={devices}",
            f"run_dir={run_root}/{cap}_{objective}_{sample}_{seed}", "trainer.enable_progress_bar=false"]
    t0 = time.time()
    p = subprocess.run([sys.executable, "-c", CHILD, cap, *args], capture_output=True, text=True, cwd=ROOT)
    row = {"cap": cap, "objective": objective, "sample": sample, "seed": seed, "args": args,
           "wall_s": round(time.time() - t0, 1), "rc": p.returncode}
    out = [json.loads(line[6:]) for line in p.stdout.splitlines() if line.startswith("BENCH ")]
    if out and "error" not in out[0]:
        row["spearman"] = out[0]["test/planted_spearman"]
    else:
        row["error"] = out[0]["error"] if out else p.stderr.strip().splitlines()[-1:]
    print(f"{cap:15s} {objective:18s} sample={sample:<6} seed={seed} "
          f"{row.get('spearman', row.get('error'))}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--objectives", default="nce,negative_sampling,full_softmax")
    parser.add_argument("--samples", default="0,0.001", help="data.sample values (0: no subsampling)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--parallel", type=int, default=2, help="runs at once (one torch thread each)")
    parser.add_argument("--run-root", default=str(ROOT / "studies" / "runs" / "skipgram_step_cap"),
                        help="where the runs are written (runs/ folders are not tracked by git)")
    parser.add_argument("--out", default=str(ROOT / "studies" / "results" / "skipgram_step_cap.json"))
    add_device_option(parser)
    args = parser.parse_args()
    device = resolve_device(args.device)
    seeds = [int(s) for s in args.seeds.split(",")]
    grid = [(c, o, float(s), seed) for o in args.objectives.split(",") for s in args.samples.split(",")
            for seed in seeds for c in CAPS]
    with ThreadPoolExecutor(args.parallel) as pool:
        rows = list(pool.map(lambda g: run(*g, device, args.run_root), grid))
    summary = {}
    for o in args.objectives.split(","):
        for s in args.samples.split(","):
            values = {c: [r.get("spearman") for r in rows
                          if (r["cap"], r["objective"], r["sample"]) == (c, o, float(s))] for c in CAPS}
            entry = {c: spread(v) for c, v in values.items()}
            if all(v is not None for vs in values.values() for v in vs):
                entry["paired_path_minus_sig_prime"] = paired(values[CAPS[0]], values[CAPS[1]])
            summary[f"{o} sample={s}"] = entry
            print(f"{o:18s} sample={s:<6} " + "  ".join(f"{c}: {fmt(entry[c], 3)} ({entry[c]['failed']} diverged)"
                                                     for c in CAPS))
    record = {"command": "python studies/" + Path(__file__).name + " " + " ".join(sys.argv[1:]),
              "device": str(device), "device_name": describe(device), "processor": processor(),
              "date": time.strftime("%Y-%m-%d"),
              "metric": "test/planted_spearman (5 epochs, recipe skipgram_synthetic, model.updates=minibatch)",
              "summary": summary, "runs": rows}
    Path(args.out).write_text(json.dumps(record, indent=1))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
