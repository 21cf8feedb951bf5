"""zoo.evaluate's seed= reaches the VAE's own evaluation seed (model.eval_seed), which draws its latents:
`seed=1` gave exactly seed 0's numbers."""

import pytest

from zoo.evaluate import evaluate


def test_evaluate_seed_changes_the_vaes_latent_draws():
    trainer = {"trainer.limit_test_batches": 2}
    default = evaluate("vae-digits", dict(trainer))
    assert evaluate("vae-digits", {**trainer, "seed": 0}) == default  # the card's seeds: 0 and eval_seed 0
    other = evaluate("vae-digits", {**trainer, "seed": 1})
    assert other.keys() == default.keys()
    assert other["test/loss"] != default["test/loss"]
    assert other["test/loss"] == pytest.approx(default["test/loss"], rel=0.05)  # the same model
