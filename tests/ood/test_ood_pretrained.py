"""The released OOD checkpoints: `zoo.evaluate NAME --json` reproduces every metric of the card,
and the joint model beats the cross-entropy one on the far OOD sets (as the card says)."""

import json

import pytest

from zoo import evaluate
from zoo.loading import pretrained_cards

NAMES = ["ood-digits-ce", "ood-digits-joint"]


@pytest.mark.parametrize("name", NAMES)
def test_evaluate_reproduces_the_card(name, capsys):
    card = pretrained_cards()[name]
    # on the CPU, where the card was made (on a GPU, TF32 convolutions move the last digits)
    assert evaluate.main([name, "--json", "trainer.accelerator=cpu"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert set(metrics) == set(card["metrics"])
    for key, value in card["metrics"].items():
        assert abs(metrics[key] - value) < 1e-4, key


def test_joint_card_beats_ce_card_on_far_ood():
    ce, joint = (pretrained_cards()[n]["metrics"] for n in NAMES)
    for s in ("photos", "uniform"):
        assert joint[f"test/{s}/msp/tnr95"] > ce[f"test/{s}/msp/tnr95"] + 0.1
    assert joint["test/acc"] > ce["test/acc"] - 0.02
