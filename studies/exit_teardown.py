"""What the interpreter's teardown costs a command: the same short training run ended the zoo's way
(`zoo.cli.leave`: exit handlers, then `os._exit`) and the usual way (`sys.exit`: every module and
the C++ libraries' statics freed first), alternating, each in a fresh process; plus `import
lightning.pytorch` alone ended both ways. Medians of the repeats.

    python studies/exit_teardown.py --repeats 5   # -> studies/results/exit_teardown.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import accelerator, add_device_option, describe, processor, resolve_device  # noqa: E402

# a vae_digits run of a few batches: imports, data, a fit, a test, checkpoints, metrics.json
TRAIN = ["recipe=vae_digits", "trainer.max_epochs=1", "trainer.limit_train_batches=5",
         "trainer.limit_val_batches=2", "trainer.limit_test_batches=2", "trainer.enable_progress_bar=false"]
# the same command ended by sys.exit, as before zoo.cli.leave
SYS_EXIT = ("import sys; sys.argv = ['zoo.train', *sys.argv[1:]]; from zoo.cli import run_command; "
            "from zoo.train import main; sys.exit(run_command(main))")


def commands(run_dir: Path, device) -> dict[str, list[str]]:
    py = sys.executable
    name, devices = accelerator(device)
    train = [*TRAIN, f"trainer.accelerator={name}", f"trainer.devices={devices}".replace(" ", "")]
    return {
        "train, zoo exit (leave)": [py, "-m", "zoo.train", *train, f"run_dir={run_dir}/leave"],
        "train, sys.exit": [py, "-c", SYS_EXIT, *train, f"run_dir={run_dir}/sys_exit"],
        "import lightning.pytorch, os._exit": [py, "-c", "import os, lightning.pytorch; os._exit(0)"],
        "import lightning.pytorch, sys.exit": [py, "-c", "import lightning.pytorch"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_device_option(ap)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "studies/results/exit_teardown.json"))
    args = ap.parse_args()
    device = resolve_device(args.device)
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cmds = commands(Path(tmp), device)
        for _ in range(args.repeats):  # alternating, so that a busy moment of the machine hits both
            for name, cmd in cmds.items():
                start = time.perf_counter()
                p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                times.setdefault(name, []).append(round(time.perf_counter() - start, 3))
                if p.returncode != 0:
                    raise SystemExit(f"{name} exited {p.returncode}: {p.stderr[-800:]}")
    rows = {name: {"command": " ".join(cmd[1:]).replace(tmp, "TMP"), "median_s": statistics.median(times[name]),
                   "seconds": times[name]} for name, cmd in cmds.items()}
    for name, row in rows.items():
        print(f"{name:38s} {row['median_s']:.2f} s (median of {args.repeats})")
    saved = {
        "train": rows["train, sys.exit"]["median_s"] - rows["train, zoo exit (leave)"]["median_s"],
        "import": rows["import lightning.pytorch, sys.exit"]["median_s"]
        - rows["import lightning.pytorch, os._exit"]["median_s"],
    }
    share = saved["train"] / rows["train, sys.exit"]["median_s"]
    print(f"teardown skipped: {saved['train']:.2f} s of the training command ({share:.0%}), "
          f"{saved['import']:.2f} s after the import alone")
    record = {"what": "the interpreter's teardown: a short vae_digits run ended by zoo.cli.leave vs sys.exit, "
                      "and `import lightning.pytorch` alone ended by os._exit vs sys.exit; fresh processes, "
                      "alternating",
              "command": "python " + " ".join(sys.argv), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "device": str(device), "device_name": describe(device), "machine": processor(),
              "repeats": args.repeats, "rows": rows,
              "median_saved_s": {k: round(v, 3) for k, v in saved.items()}}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
