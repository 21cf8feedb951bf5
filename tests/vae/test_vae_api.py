"""The VAEs' inference API (vae/predict.py) on the released models: shapes, seeds, the same numbers as
zoo.evaluate's card and zoo.predict's files, and one clear error for bad input."""

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.utils import save_image

import zoo
from tests.api_testlib import model_datamodule
from zoo.errors import UserError
from zoo.models.vae import plots
from zoo.predict import main as predict


@pytest.fixture(scope="module")
def vae():
    return zoo.load("vae-digits")


@pytest.fixture(scope="module")
def test_images(vae):
    dm = model_datamodule(vae)
    return torch.cat([b[0] for b in dm.test_dataloader()])  # (270, 1, 8, 8) binarised


@pytest.mark.parametrize("name", ["vae-digits", "dvae-digits"])
def test_shapes_types_and_seeds(name):
    model = zoo.load(name)
    x = model.sample(5, seed=3)
    assert x.shape == (5, 1, 8, 8) and x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1
    assert torch.equal(x, model.sample(5, seed=3)) and not torch.equal(x, model.sample(5, seed=4))
    assert not x.requires_grad
    code = model.encode(x)
    assert code.shape == ((5, 8) if name == "vae-digits" else (5, 20, 10))
    if name == "dvae-digits":  # the posterior's mode: one-hots
        assert torch.equal(code.sum(-1), torch.ones(5, 20))
    assert model.reconstruct(x).shape == (5, 1, 8, 8)
    ll = model.log_likelihood(x, k=20, seed=1)
    assert ll.shape == (5,) and (ll < 0).all() and torch.equal(ll, model.log_likelihood(x, k=20, seed=1))
    binary = model.sample(5, seed=3, mean=False)  # x ~ p(x|z): Bernoulli pixels
    assert set(binary.unique().tolist()) <= {0.0, 1.0}


def test_log_likelihood_is_the_cards_iwae_bound(vae, test_images):
    """The card's test/iwae_nll (zoo.evaluate, k = 100, its own draws) is the mean of -log_likelihood over the
    test images up to Monte Carlo error: seed 0, tolerance 0.05 nats (the bound's sd over seeds is ~0.01)."""
    card = vae.run_info["card"]["metrics"]["test/iwae_nll"]
    assert len(test_images) == 270
    got = -vae.log_likelihood(test_images, k=100, seed=0).mean().item()
    assert abs(got - card) < 0.05, (got, card)
    # tighter than the ELBO with one sample, and tightening with k (Burda et al. 2016), on average
    assert -vae.log_likelihood(test_images, k=1, seed=0).mean().item() > got


def test_sample_is_what_predict_writes(vae, tmp_path):
    out = tmp_path / "cli.png"
    assert predict(["vae-digits", "n=6", "seed=2", f"out={out}"]) == 0
    save_image(plots.upscale(vae.sample(6, seed=2).cpu()), tmp_path / "api.png", nrow=8, padding=1, pad_value=0.5)
    assert np.array_equal(np.asarray(Image.open(out)), np.asarray(Image.open(tmp_path / "api.png")))


def test_files_pil_and_numpy_preprocess_alike_and_reconstruct_as_predict(vae, test_images, tmp_path):
    digit = test_images[0, 0].numpy()  # 0/1 ink on black
    big = Image.fromarray((255 - 255 * digit).astype(np.uint8)).resize((32, 32), Image.NEAREST)  # black on white
    path = tmp_path / "digit.png"
    big.save(path)
    from_file, from_pil, from_array = (vae.preprocess(v) for v in (str(path), big, np.asarray(big)))
    assert from_file.shape == (1, 1, 8, 8) and torch.equal(from_file, from_pil) and torch.equal(from_pil, from_array)
    assert torch.equal(from_file[0, 0], test_images[0, 0])  # inverted (light border) and binarised back
    assert torch.equal(vae.preprocess(big, invert="false"), 1 - from_file)
    assert predict(["vae-digits", str(path)]) == 0
    written = np.asarray(Image.open(tmp_path / "digit_recon.png").convert("L"))  # 64x64, upscaled 8x
    expected = (vae.reconstruct(str(path))[0, 0].numpy() * 255 + 0.5).astype(np.uint8).repeat(8, 0).repeat(8, 1)
    assert np.abs(written.astype(int) - expected).max() <= 1


@pytest.mark.parametrize("call, expected", [
    (lambda m: m.sample(0), "n must be an integer >= 1, got 0"),
    (lambda m: m.sample(2.5), "n must be an integer >= 1"),
    (lambda m: m.sample(2, seed=-1), "seed must be an integer >= 0"),
    (lambda m: m.reconstruct(torch.zeros(2, 3, 8, 8)), r"shape \(B, 1, 8, 8\), got \(2, 3, 8, 8\) \(wrong channels\)"),
    (lambda m: m.encode(torch.zeros(2, 1, 28, 28)), r"\(wrong size\)"),
    (lambda m: m.encode(torch.zeros(1, 8, 8)), "add the batch dimension"),
    (lambda m: m.log_likelihood(torch.zeros(2, 1, 8, 8), k=0), "k must be an integer >= 1"),
    (lambda m: m.reconstruct("no/such/file.png"), "not found"),
    (lambda m: m.reconstruct(np.zeros((8, 8, 2))), r"numpy image must be \(H, W\) or \(H, W, C\)"),
    (lambda m: m.preprocess(np.zeros((8, 8)), invert="maybe"), "invert must be auto, true or false"),
    (lambda m: m.encode(torch.full((1, 1, 8, 8), float("nan"))), "nan or infinite"),
])
def test_bad_input_is_one_clear_error(vae, call, expected):
    with pytest.raises(UserError, match=expected):
        call(vae)
