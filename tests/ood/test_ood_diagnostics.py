"""The joint mode's GAN curves (zoo/models/ood/diagnostics.py): logged every validation, drawn into the run
folder, made without touching the run's random stream; and the recipe options a robust recipe is tried with
(the learning-rate drops, spectral normalisation of D)."""

import csv

import pytest
import torch

from zoo.models.ood.diagnostics import fixed_noise, made_ood
from zoo.models.ood.nets import Discriminator
from zoo.train import train

TINY = ["recipe=ood_digits_joint", "trainer.enable_progress_bar=false", "model.mahalanobis=false",
        "model.odin_temperatures=[1000]", "model.odin_eps=[0]", "checkpoint.every_n_epochs=100", "trainer.max_epochs=2",
        "trainer.limit_train_batches=2", "model.gan_grid_every_n_epochs=1", "test_after_fit=false", "seed=0"]
CURVES = ("d_loss", "g_loss", "g_kl", "kl_out", "d_real", "d_fake", "msp_g", "kl_g", "msp_in", "msp_permuted",
          "msp_blurred", "msp_inverted")


def logged(run_dir) -> list[dict]:
    """The rows of the run's metrics.csv that hold the GAN's curves."""
    with open(run_dir / "logs" / "metrics.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r.get("gan/msp_g")]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return train([*TINY, f"run_dir={tmp_path_factory.mktemp('diag')}", "model.lr_drop_epochs=[1]",
                  "model.lr_drop=0.5"])


def test_the_gan_curves_are_logged_every_epoch(run):
    rows = logged(run.run_dir)
    assert len(rows) == 2  # one a validated epoch
    for row in rows:
        values = {k: float(row[f"gan/{k}"]) for k in CURVES}
        for k in ("msp_g", "msp_in", "msp_permuted", "msp_blurred"):
            assert 0.1 - 1e-6 <= values[k] <= 1.0, (k, values[k])  # a mean max-softmax over 10 classes
        assert values["kl_g"] >= 0 and values["g_kl"] >= 0 and values["d_loss"] > 0
        assert 0 <= float(row["val/made_tnr95"]) <= 1
        for name in ("photos", "uniform", "gaussian", "rot90"):  # each validation OOD set's TNR, not only the mean
            assert 0 <= float(row[f"val/{name}/msp_tnr95"]) <= 1


def test_the_pictures_are_written(run):
    plots = run.run_dir / "plots"
    assert (plots / "gan_curves.png").stat().st_size > 0
    from PIL import Image

    grid = Image.open(plots / "generated_over_training.png")
    # epochs 1 and 2: two rows of 16 samples, each 8x8 upscaled to 32 + 1 pixel padding
    assert grid.size == (16 * 33 + 1, 2 * 33 + 1)


def test_the_learning_rates_drop_at_the_given_epochs(run):
    lrs = [o.param_groups[0]["lr"] for o in run.model.trainer.optimizers]
    assert lrs == pytest.approx([1e-3 * 0.5, 2e-4 * 0.5, 2e-4 * 0.5])  # one drop by 0.5, after the first epoch


def test_made_ood_kinds_and_fixed_noise_leave_the_random_stream_alone():
    x = torch.rand(5, 1, 8, 8)
    state = torch.get_rng_state()
    made = made_ood(x)
    z = fixed_noise(4, 3, x)
    assert torch.equal(state, torch.get_rng_state())
    assert torch.equal(z, fixed_noise(4, 3, x))  # the same z every validation
    # permuted: each image's own pixels in another order; blurred: the same mean brightness, smoothed
    assert torch.equal(made["permuted"].flatten(1).sort(1).values, x.flatten(1).sort(1).values)
    assert not torch.equal(made["permuted"], x)
    assert made["blurred"].shape == x.shape and made["blurred"].std() < x.std()


def test_spectral_norm_bounds_each_layer_of_d():
    torch.manual_seed(0)
    d = Discriminator("mlp", [1, 8, 8], 32, spectral_norm=True)
    for _ in range(20):  # power iterations run on each forward in train mode
        d(torch.rand(4, 1, 8, 8))
    linear = [m for m in d.net if isinstance(m, torch.nn.Linear)]
    assert len(linear) == 3
    for m in linear:
        assert torch.linalg.matrix_norm(m.weight.detach(), ord=2) == pytest.approx(1.0, abs=0.05)


def test_instance_noise_reaches_every_input_of_d(run):
    """D sees x + N(0, sigma^2) per pixel; annealed, sigma falls linearly to 0 at the last epoch."""
    from zoo.models.ood.module import OODClassifier

    torch.manual_seed(0)
    model = OODClassifier({"mode": "joint", "instance_noise": 0.5}, run.model.data_info)
    model.discriminator = torch.nn.Flatten()  # D's "logits" are then its noised input, flattened
    seen = model.judge(torch.zeros(200, 1, 8, 8))
    assert seen.std().item() == pytest.approx(0.5, rel=0.05)  # 12,800 draws: s.e. of the std ~0.6 %
    assert torch.equal(model.judge(torch.zeros(2, 1, 8, 8)) != 0, torch.ones(2, 64, dtype=torch.bool))
    quiet = OODClassifier({"mode": "joint"}, run.model.data_info)
    quiet.discriminator = torch.nn.Flatten()
    assert torch.equal(quiet.judge(torch.zeros(2, 1, 8, 8)), torch.zeros(2, 64))  # 0: D sees x itself
