"""A card's recipe, re-trained, lands inside the seed spread recorded on the card (issue 15).

`benchmarks/recipe_seeds.py --write-cards` trains a card's recipe with several seeds (one torch
thread, CPU) and writes mean / sd / min / max of every test metric onto the card as
`recipe_seeds`. Here (`make reproduce`) the card's own command is run again with the card's
seed on the CPU with one thread, scored like the card, and every recorded metric must lie inside
[min, max] of the recorded runs widened by half a standard deviation (1e-6 when every seed gave
the same number): the re-run repeats one of the recorded runs, so on the machine kind the card
names it lands on that run's numbers.
"""

from __future__ import annotations

import math
import shlex

import pytest

from benchmarks.common.devices import processor  # the name recipe_seeds.py records with the spread
from zoo.loading import pretrained_cards

CARDS = pretrained_cards()
WITH_SPREAD = sorted(n for n, c in CARDS.items() if "recipe_seeds" in c)


def test_every_card_records_what_retraining_its_recipe_gives():
    missing = sorted(set(CARDS) - set(WITH_SPREAD))
    assert not missing, f"cards without a recipe_seeds spread (run benchmarks/recipe_seeds.py --write-cards): {missing}"
    for name in WITH_SPREAD:
        seeds = CARDS[name]["recipe_seeds"]
        assert len(seeds["seeds"]) >= 3 and seeds["device"] and seeds["threads"] == 1
        headline = [k for k in seeds["metrics"] if k in CARDS[name]["metrics"]]
        assert headline, f"{name}: the spread names none of the card's metrics"
        for key in headline:
            s = seeds["metrics"][key]
            assert s["n"] + s["failed"] == len(seeds["seeds"]) and (s["n"] < 2 or s["sd"] is not None)


@pytest.mark.reproduce
@pytest.mark.parametrize("name", WITH_SPREAD)
def test_recipe_retrains_inside_its_recorded_spread(name, tmp_path):
    import torch

    from zoo.evaluate import evaluate
    from zoo.train import train

    card = CARDS[name]
    recorded = card["recipe_seeds"]
    args = [a for a in shlex.split(card["command"])[3:] if not a.startswith("seed=")]
    torch.set_num_threads(recorded["threads"])
    run = train([*args, f"seed={card['seed']}", "trainer.accelerator=cpu", "test_after_fit=false",
                 f"run_dir={tmp_path / 'run'}"])
    got = evaluate(str(run.run_dir / "checkpoints" / "last.ckpt"))
    outside = {}
    for key, s in recorded["metrics"].items():
        if s["n"] == 0 or key not in got or math.isnan(got[key]):
            continue
        margin = 0.5 * (s["sd"] or 0.0) + 1e-6 + 1e-6 * abs(s["mean"])
        if not s["min"] - margin <= got[key] <= s["max"] + margin:
            outside[key] = (got[key], (s["min"], s["max"]))
    here = processor()
    assert not outside, (f"{name}: re-trained recipe outside its recorded spread (got, [min, max]): {outside}; "
                         f"spread recorded on: {recorded.get('processor', 'not recorded')}, this CPU: {here} "
                         "(sampling models repeat exactly only on the same kind of processor: "
                         "docs/captioning.md)")
