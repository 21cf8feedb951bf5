"""The captioning recipes' intra-op threads: a short ``sat_shapes_soft`` run (20 training batches, no validation,
one test batch) with ``threads=0`` (torch's default: one per core), ``threads=1`` and ``threads=2``, interleaved
(0, 1, 2, 0, 1, 2, ...), each in a fresh process as ``python -m zoo.train`` runs it. Recorded per run: the seconds
of ``Trainer.fit`` (the 20 batches, Lightning's start included) and of the whole process. Study page:
studies/2026-12-01-captioning-threads.md.

    python studies/captioning_threads.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's zoo, in the child processes too (they run this file)
OUT = ROOT / "studies" / "results" / "2026-12-01-captioning_threads.json"
RUN = ["recipe=sat_shapes_soft", "trainer.max_steps=20", "trainer.limit_val_batches=0", "trainer.limit_test_batches=1",
       "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false"]
MARK = "FIT_SECONDS "


def child(argv: list[str]) -> int:
    """``python -m zoo.train`` with ``Trainer.fit`` timed (printed as ``FIT_SECONDS s``)."""
    import lightning as L

    from zoo.train import main

    fit = L.Trainer.fit

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return fit(self, *args, **kwargs)
        finally:
            print(f"{MARK}{time.perf_counter() - start:.3f}", flush=True)

    L.Trainer.fit = timed
    return main(argv)


def measure(threads: int, run_dir: str, on: list[str]) -> dict:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--child", *RUN, *on, f"threads={threads}", f"run_dir={run_dir}"],
                         capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    assert out.returncode == 0, out.stderr[-2000:]
    fit = float(next(line for line in out.stdout.splitlines() if line.startswith(MARK))[len(MARK):])
    return {"threads": threads, "fit_s": round(fit, 3), "process_s": round(wall, 3),
            "load_average_1min": os.getloadavg()[0]}  # the machine's other work, after the run


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", default="0,1,2")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--device", default="cpu", help="where the runs train: cpu (default; threads are the CPU's)")
    a = ap.parse_args()
    from benchmarks.common.devices import accelerator, resolve_device

    device = resolve_device(a.device)
    acc, devices = accelerator(device)
    on = [f"trainer.accelerator={acc}", f"trainer.devices={devices}"]
    choices = [int(t) for t in a.threads.split(",")]
    runs = []
    with tempfile.TemporaryDirectory() as run_dir:
        for repeat in range(a.repeats):
            for threads in choices:
                row = {"repeat": repeat, **measure(threads, run_dir, on)}
                runs.append(row)
                print(json.dumps(row), flush=True)
    summary = {t: {"median_fit_s": statistics.median(r["fit_s"] for r in runs if r["threads"] == t),
                   "median_process_s": statistics.median(r["process_s"] for r in runs if r["threads"] == t)}
               for t in choices}
    for t, s in summary.items():
        print(f"threads={t}: fit {s['median_fit_s']:.2f} s, process {s['median_process_s']:.2f} s (medians)")
    record = {"command": "python studies/captioning_threads.py " + " ".join(sys.argv[1:]), "run": RUN,
              "device": str(device),
              "cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine(),
              "load_average_at_end": os.getloadavg(), "runs": runs, "summary": summary}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        raise SystemExit(child(sys.argv[2:]))
    main()
