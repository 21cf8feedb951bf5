"""Hard attention's gradient estimators over seeds, beside soft attention, on the shapes scenes.

    python benchmarks/sat_shapes.py                          # train what is not on record, then the table
    python benchmarks/sat_shapes.py --only rloo4_sum --rerun # train one variant again
    python benchmarks/sat_shapes.py --table-only             # the table from the records alone

Every hard variant is the recipe `sat_shapes_hard` (the frozen encoder of sat-shapes-soft, the soft
start, 20 epochs, Adam 1e-3) with its estimator or cost changed by overrides, so the rows differ in
one thing. Each variant is trained with seeds 0-2 by `recipe_seeds.train_seeds` (its own process
per run, one torch thread, `--parallel` at once, scored like the cards: greedy captions on the 500
test scenes) into its own record, benchmarks/results/seeds_<recipe>[_<tag>]_<device>.json; a
variant whose record exists is read, not trained again (`--rerun` trains it anyway). Writes
benchmarks/results/sat_shapes_<device>.json (the records' names and commands, mean / sd / every run
per metric, and each variant minus the recipe paired by seed) and sat_shapes_<device>.md (the table
in docs/captioning.md). The one-seed table of the 6-epoch recipes from pixels that this replaced is
sat_shapes_6epochs_seed0.json.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import add_device_option, processor, resolve_device
from benchmarks.common.sat_table import VARIANTS, summarise, table
from benchmarks.common.seeds import record_path, train_seeds

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_device_option(ap)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--parallel", type=int, default=3, help="runs at once (each uses one torch thread)")
    ap.add_argument("--only", default="", help="comma-separated tags to train (recipe rows: the recipe's name)")
    ap.add_argument("--rerun", action="store_true", help="train the chosen variants even when on record")
    ap.add_argument("--table-only", action="store_true", help="train nothing: the table from the records")
    ap.add_argument("--runs", default="runs/bench_sat_shapes", help="run folders go here")
    args = ap.parse_args()
    device = resolve_device(args.device)
    seeds = [int(s) for s in args.seeds.split(",")]
    only = set(filter(None, args.only.split(",")))
    records = {}
    for tag, recipe, overrides, what in VARIANTS:
        path = record_path(recipe, tag, device.type)
        chosen = not only or (tag or recipe) in only
        if chosen and not args.table_only and (args.rerun or not path.exists()):
            command = ["python", "benchmarks/recipe_seeds.py", "--recipes", recipe, "--seeds", args.seeds,
                       "--parallel", str(args.parallel), "--device", args.device, "--runs", args.runs]
            command += ["--extra", *overrides, "--tag", tag] if tag else []
            print(f"{what}: training seeds {seeds}", flush=True)
            train_seeds(recipe, seeds, device, args.parallel, overrides, tag, args.runs, shlex.join(command))
        if path.exists():
            records[(tag, recipe)] = json.loads(path.read_text())
        else:
            print(f"{what}: no record {path.relative_to(ROOT)} (left out of the table)", file=sys.stderr)
    rows = summarise(records)
    out = {"what": (__doc__ or "").split("\n")[0], "device": str(device), "machine": processor(),
           "command": " ".join(["python", "benchmarks/sat_shapes.py", *sys.argv[1:]]), "rows": rows}
    (RESULTS / f"sat_shapes_{device.type}.json").write_text(json.dumps(out, indent=1) + "\n")
    (RESULTS / f"sat_shapes_{device.type}.md").write_text(table(rows) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
