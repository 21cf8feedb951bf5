"""What the shared recipe tests need of the VAEs' recipes (collected by tests/recipe_data.py)."""

from pathlib import Path


def tiny_mnist(tmp_path: Path) -> list[str]:
    """MNIST's four IDX files (60 training, 20 test images), gzipped."""
    import numpy as np

    from zoo.models.vae.data import write_idx

    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    for name, shape in [("train-images-idx3-ubyte", (60, 28, 28)), ("train-labels-idx1-ubyte", (60,)),
                        ("t10k-images-idx3-ubyte", (20, 28, 28)), ("t10k-labels-idx1-ubyte", (20,))]:
        high = 256 if len(shape) == 3 else 10
        write_idx(root / "mnist" / f"{name}.gz", rng.integers(0, high, shape, dtype=np.uint8))
    return [f"data.root={root}", "data.val_size=20", "data.batch_size=10"]


REAL_DATA = {"vae_mnist": tiny_mnist, "dvae_mnist": tiny_mnist}

SMALL = ["model.hidden=32"]
RESUME = {
    "vae_digits": SMALL,  # reparameterised Gaussian latents
    "dvae_digits": SMALL,  # Gumbel-softmax
    "dvae_digits_binary": SMALL,  # DisARM's antithetic pairs
    "dvae_digits_reinforce": SMALL,  # score function with a learned baseline
    "dvae_digits_relax": SMALL,  # RELAX: a control-variate network and its own optimisation
    "dvae_digits_rloo": SMALL,
    "dvae_digits_st": SMALL,
}
# the cases make test resumes (the most stateful loops); the rest run in make test-slow
RESUME_FAST = ("vae_digits", "dvae_digits_relax")
REPRESENTED = "the same model and training loop as {}, on data read from files (their reader has its own tests)"
NOT_RESUMED = {"vae_mnist": REPRESENTED.format("vae_digits"), "dvae_mnist": REPRESENTED.format("dvae_digits")}
# an estimator runs on the first host its node fits: arm and disarm need binary latents, expectation and
# unordered_set one latent
ESTIMATOR_HOSTS = {"vae": ["vae_digits"], "dvae": ["dvae_digits", "dvae_digits_binary", "dvae_digits:one_latent"]}
HOST_SETTINGS = {"dvae_digits:one_latent": ("dvae_digits", ["model.n_latents=1"])}
