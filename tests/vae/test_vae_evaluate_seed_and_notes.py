"""What a VAE user is told: zoo.evaluate's seed= reaches the VAE's own evaluation seed (model.eval_seed),
which draws its latents (`seed=1` gives other numbers than seed 0); a note on an odd decoder / data pair."""

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


def test_a_gaussian_decoder_on_binarised_pixels_gets_a_note(tmp_path, capsys):
    """Allowed (test -ELBO 362 on the digits), but the recipes pair it with data.binarize=none."""
    from zoo.train import train

    common = [f"run_dir={tmp_path}", "trainer.max_steps=2", "test_after_fit=false", "model.likelihood=gaussian"]
    train(["recipe=vae_digits", *common])
    assert "note: model.likelihood=gaussian on binarised pixels (data.binarize=static)" in capsys.readouterr().err
    train(["recipe=vae_digits", *common, "data.binarize=none"])
    assert "likelihood=gaussian on binarised" not in capsys.readouterr().err
