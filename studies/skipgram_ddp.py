"""Skip-gram's minibatch path under DDP: 2 CPU processes against 1, planted corpus, seeds 0..S-1.

Each rank trains every second chunk from the same tables and the ranks' changes are summed after
every chunk (averaged on a tiny vocabulary, where every chunk moves every row; docs/skipgram.md).
This runs ``python -m zoo.train recipe=skipgram_synthetic model.updates=minibatch`` with 1 process and
with ``trainer.devices=2 trainer.strategy=ddp`` on two planted vocabularies (1,620 words: the ranks'
changes summed; 80 words: averaged) and reports the test Spearman against the planted truth, mean ±
sd over the seeds, the paired difference (2 processes - 1) with its standard error, and every run.

    python studies/skipgram_ddp.py [--seeds 0,1,2] [--zoo model.window_pairs=at_once]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import accelerator, add_device_option, describe, processor, resolve_device
from zoo.spread import fmt, paired, spread

ROOT = Path(__file__).resolve().parent.parent
COMMON = ["recipe=skipgram_synthetic", "model.updates=minibatch", "model.dim=32", "trainer.max_epochs=3",
          "data.chunk_tokens=50000", "trainer.enable_progress_bar=false"]
VOCABULARIES = {  # name -> planted corpus (groups x forms + 20 function words)
    "1620 words": ["data.planted.groups=400", "data.planted.forms=4", "data.planted.tokens=600000"],
    "80 words": ["data.planted.groups=15", "data.planted.forms=4", "data.planted.tokens=150000"],
}


def run(args: list[str], run_dir: Path) -> dict:
    """One zoo.train command (fit, then test) in a fresh process; its test metrics."""
    full = [*args, f"run_dir={run_dir}"]
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "zoo.train", *full], capture_output=True, text=True, cwd=ROOT)
    row = {"args": args, "rc": p.returncode, "wall_s": round(time.time() - t0, 1)}
    if p.returncode:
        row["error"] = p.stderr[-2000:]
    else:
        (metrics,) = run_dir.glob("skipgram_synthetic/*/metrics.json")
        row["spearman"] = json.loads(metrics.read_text())["test/spearman"]
    print(" ".join(args[len(COMMON):]), row.get("spearman", "failed"), f"{row['wall_s']} s", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--zoo", nargs="*", default=[], metavar="KEY=VALUE", help="extra zoo.train overrides")
    parser.add_argument("--out", default=str(ROOT / "studies" / "results" / "skipgram_ddp_cpu.json"))
    add_device_option(parser)
    args = parser.parse_args()
    device = resolve_device(args.device)
    acc, _ = accelerator(device)
    seeds = [int(s) for s in args.seeds.split(",")]
    report = {"command": shlex.join(["python", "studies/skipgram_ddp.py", *sys.argv[1:]]), "device": str(device),
              "machine": processor(),
              "device_name": describe(device), "common": COMMON + args.zoo, "seeds": seeds, "vocabularies": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, corpus in VOCABULARIES.items():
            rows: dict[str, list] = {"1 process": [], "2 processes": []}
            for seed in seeds:
                for procs in rows:
                    ddp = ["trainer.devices=2", "trainer.strategy=ddp"] if procs.startswith("2") else []
                    extra = [*COMMON, *args.zoo, *corpus, f"seed={seed}", f"trainer.accelerator={acc}", *ddp]
                    rows[procs].append(run(extra, Path(tmp) / f"{name.split()[0]}_{procs[0]}_{seed}"))
            values = {k: [r.get("spearman") for r in rs] for k, rs in rows.items()}
            ok = all(v is not None for vs in values.values() for v in vs)
            report["vocabularies"][name] = {
                "corpus": corpus, "runs": rows, "spearman": {k: spread(v) for k, v in values.items()},
                "two_minus_one": paired(values["2 processes"], values["1 process"]) if ok else None}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    for name, v in report["vocabularies"].items():
        d = v["two_minus_one"]
        diff = f"{d['mean']:+.3f} ± {d['se']:.3f}" if d and d["se"] is not None else "n/a"
        print(f"{name}: 1 process {fmt(v['spearman']['1 process'], 3)}, 2 processes "
              f"{fmt(v['spearman']['2 processes'], 3)}, 2 - 1 {diff}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
