"""How fast the command line answers when it need not train: `--help`, `--list`, a mistyped
recipe name, a mistyped model, data or trainer key and a mistyped estimator (all answered before torch
is imported; the keys and estimators since 2026-11-27, from the models' torch-free config.py,
zoo/estimators/config.py and lightning.Trainer's arguments read from its source), each in a fresh
process, median of repeats.

    python benchmarks/cli_latency.py --repeats 7   # -> benchmarks/results/cli_latency.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import add_device_option, processor, resolve_device  # noqa: E402

COMMANDS = {  # name -> arguments of `python -m zoo.train`, and the exit status it must give
    "help": (["--help"], 0),
    "list": (["--list"], 0),
    "mistyped recipe": (["recipe=vae_digitz"], 2),
    "mistyped key": (["recipe=vae_digits", "model.latent_dimm=3"], 2),
    "mistyped data key": (["recipe=skipgram_lee", "data.min_cont=2"], 2),
    "mistyped estimator": (["recipe=vae_digits", "model.estimator=reparm"], 2),
    "mistyped trainer key": (["recipe=vae_digits", "trainer.max_epoch=3"], 2),
    "python alone (reference)": (None, 0),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_device_option(ap)  # recorded only: these commands stop before any tensor exists
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/cli_latency.json"))
    args = ap.parse_args()
    device = resolve_device(args.device)
    rows = {}
    for name, (argv, status) in COMMANDS.items():
        cmd = [sys.executable, "-c", "pass"] if argv is None else [sys.executable, "-m", "zoo.train", *argv]
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            times.append(round(time.perf_counter() - start, 4))
            if p.returncode != status:
                raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}, expected {status}: {p.stderr[-500:]}")
        rows[name] = {"command": " ".join(cmd[1:]), "median_s": statistics.median(times), "seconds": times}
        print(f"{name:28s} {rows[name]['median_s']:.3f} s (median of {args.repeats})")
    record = {"command": "python " + " ".join(sys.argv), "device": str(device), "machine": processor(),
              "repeats": args.repeats, "rows": rows}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
