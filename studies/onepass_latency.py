"""How long `python -m zoo.train` takes to answer a recipe mistake (and --help, print_config) in a checkout:
clock time and CPU time (user + system) of each command in a fresh process, median of repeats. CPU time is
the steadier figure on a shared machine. Run it in two checkouts to compare them:

    python studies/onepass_latency.py --repeats 5 --out studies/results/onepass_latency_branch.json
    (cd /path/to/main && python /path/to/this/studies/onepass_latency.py --repeats 5 --out ...main.json)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
    "mistyped recipe": (["recipe=vae_digitz"], 2),
    "mistyped model key": (["recipe=vae_digits", "model.latent_dimm=3"], 2),
    "mistyped trainer key": (["recipe=vae_digits", "trainer.max_epoch=3"], 2),
    "trainer value": (["recipe=vae_digits", "trainer.precision=banana"], 2),
    "estimator misfit": (["recipe=dvae_digits", "model.estimator=reparam"], 2),
    "callback option": (["recipe=vae_digits", "callbacks=[{name: ema, decayy: 0.9}]"], 2),
    "print_config": (["recipe=vae_digits", "print_config=true"], 0),
}


def measure(args: list[str], status: int) -> tuple[float, float]:
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "zoo.train", *args], capture_output=True, text=True, timeout=600)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    assert out.returncode == status, (args, out.returncode, out.stderr[-500:])
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_device_option(ap)  # recorded only: these commands stop before any tensor exists
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    device = resolve_device(a.device)
    rows = {}
    for name, (args, status) in COMMANDS.items():
        runs = [measure(args, status) for _ in range(a.repeats)]
        rows[name] = {"command": "python -m zoo.train " + " ".join(args),
                      "median_wall_s": round(statistics.median(w for w, _ in runs), 3),
                      "median_cpu_s": round(statistics.median(c for _, c in runs), 3),
                      "wall_s": [round(w, 3) for w, _ in runs], "cpu_s": [round(c, 3) for _, c in runs]}
        print(f"{name:22s} wall {rows[name]['median_wall_s']:.3f} s  cpu {rows[name]['median_cpu_s']:.3f} s")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    argv = [os.path.relpath(x) if os.path.isabs(x) else x for x in sys.argv]  # no path of this machine on record
    Path(a.out).write_text(json.dumps({"command": "python " + " ".join(argv), "checkout": commit or "not git",
                                       "device": str(device), "machine": processor(), "repeats": a.repeats,
                                       "load": os.getloadavg(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
