"""What re-training a recipe gives: the recipe run with several seeds, each scored like its card.

    python benchmarks/recipe_seeds.py --recipes vae_digits,skipgram_synthetic --seeds 0,1,2,3,4
    python benchmarks/recipe_seeds.py --recipes sat_shapes_soft --seeds 0,1,2 --parallel 2
    python benchmarks/recipe_seeds.py --recipes vae_digits --write-cards   # + the spread onto its card
    python benchmarks/recipe_seeds.py --recipes vae_digits --cards-only    # recorded spread -> cards

A sweep over ``seed`` alone (``python -m zoo.sweep recipe=R seed=0,1,2 threads=1``, see docs/sweeps.md):
every run is `python -m zoo.train recipe=R seed=S threads=1 test_after_fit=false` in its own process (one
torch thread, as the cards were trained), then its last.ckpt is scored by `zoo.evaluate` here (one
thread): the same scoring as `python -m zoo.evaluate <card>`, which seeds the test with the run's seed
(a test straight after training goes on from training's random stream). `seed=` changes the
initialisation and the sampling; data splits are the datamodule's `data.seed` and stay fixed. The
sweep's folder is <--runs>/sweeps/<recipe>[_<tag>]: started again, it skips the seeds that ended
(delete the folder for a fresh record). Writes every run (failures too: exit status and the last
error line) and mean / sd / min / max of every test metric to benchmarks/results/seeds_<recipe>_<device>.json.

`--write-cards` copies that spread onto every pretrained card trained from the recipe (field
`recipe_seeds`), so a user reads what re-training gives next to the released numbers;
`tests/test_pretrained_cards.py` (slow, `make reproduce`) re-trains the recipe and checks it lands
inside the recorded spread.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import add_device_option, resolve_device
from benchmarks.common.seeds import record_path, train_seeds, write_cards
from zoo.spread import fmt

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_device_option(ap)
    ap.add_argument("--recipes", required=True, help="comma-separated recipe names")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--parallel", type=int, default=1, help="runs at once (each uses one torch thread)")
    ap.add_argument("--extra", nargs="*", default=[], help="key=value overrides added to every run")
    ap.add_argument("--tag", default="", help="added to the JSON's name, for a variant made with --extra")
    ap.add_argument("--runs", default="runs/bench_recipe_seeds", help="run folders go here")
    ap.add_argument("--write-cards", action="store_true", help="record the spread on the recipe's cards")
    ap.add_argument("--cards-only", action="store_true",
                    help="train nothing: copy the recorded spreads (results/seeds_RECIPE_DEVICE.json) to the cards")
    args = ap.parse_args()
    device = resolve_device(args.device)
    seeds = [int(s) for s in args.seeds.split(",")]
    for recipe in args.recipes.split(","):
        if args.cards_only:  # e.g. after a card was re-exported
            out = record_path(recipe, "", device.type)
            print(recipe, "cards updated:", ", ".join(write_cards(recipe, json.loads(out.read_text()), out)) or "none")
            continue
        command = " ".join(["python", "benchmarks/recipe_seeds.py", *sys.argv[1:]])
        record, out = train_seeds(recipe, seeds, device, args.parallel, args.extra, args.tag, args.runs, command)
        print(f"{recipe} over seeds {seeds} ({record['total_s']:.0f} s) -> {out.relative_to(ROOT)}")
        for k, s in record["summary"].items():
            print(f"  {k:<36} {fmt(s, 4):>20}   runs {s['values']}")
        if args.write_cards and not args.extra:  # a card records its own recipe, not a variant
            print("  cards updated:", ", ".join(write_cards(recipe, record, out)) or "none")


if __name__ == "__main__":
    main()
