"""The VAEs' options (``vae``, ``dvae``) and their datamodules' (``digits``, ``mnist``): no torch here,
so a recipe's keys are checked before torch and Lightning are imported (declared below: ``MODELS.declare``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from zoo.data_schema import BatchedDataOptions
from zoo.estimators.capabilities import StochasticNode
from zoo.registry import DATAMODULES, MODELS, DataSpec, ModelSpec
from zoo.schema import EstimatorSpec, at_least, between, choice, estimator_option, positive

ARCHS = ("mlp", "conv")  # encoder / decoder families (nets.py)
LIKELIHOODS = ("bernoulli", "gaussian")


@dataclass
class CommonConfig:
    arch: str = choice("mlp", list(ARCHS))  # encoder/decoder family: mlp | conv
    hidden: int = positive(256)  # width of the hidden layers
    channels: int = positive(32)  # conv arch: channels of the first convolution (then 2x)
    likelihood: str = choice("bernoulli", list(LIKELIHOODS))  # p(x|z): bernoulli (binary) | gaussian (grey)
    decoder_std: float = 0.1  # gaussian decoder: fixed pixel std; 0 = learned per pixel (floor 0.01)
    n_samples: int = 0  # latent samples per image per step; 0 = the estimator's own default
    beta: float = 1.0  # weight of the KL term (beta-VAE); val/test losses always use 1
    kl_warmup_steps: int = 0  # linearly raise the KL weight from 0 to beta over this many steps
    lr: float = positive(1e-3)  # Adam learning rate
    iwae_samples: int = positive(100)  # k for the importance-weighted log p(x) estimate on the test split
    val_iwae_samples: int = 0  # k for val/iwae_nll every validation (0: skip)
    eval_seed: int = 0  # seed of the latent draws in validation/test (metrics are reproducible)
    plot_every_n_epochs: int = positive(10)  # write sample / reconstruction / traversal grids this often


@dataclass
class VAEConfig(CommonConfig):
    latent_dim: int = positive(8)  # size of z
    estimator: EstimatorSpec = estimator_option("reparam")  # estimator for z: a name or {name: ..., options};
    # reparam is the standard; any estimator for continuous nodes fits (see stochastic_node)
    traversal_dims: int = positive(8)  # latent traversal: how many dimensions (those with the largest KL) to vary
    traversal_range: float = 3.0  # latent traversal: z_d goes from -range to +range (prior std units)
    active_threshold: float = 0.01  # "active" unit: Var_x(E[z_d|x]) above this ("Importance Weighted Autoencoders")


@dataclass
class DVAEConfig(CommonConfig):
    n_latents: int = positive(20)  # N categorical latent variables
    n_classes: int = at_least(10, 2)  # K classes each
    estimator: EstimatorSpec = estimator_option("gumbel_softmax")  # a name or {name: ..., options}: gumbel_softmax,
    # straight_through, reinforce (baseline: none|ema|batch_mean|learned), rloo (n >= 2 samples), relax;
    # with n_classes 2 also arm, disarm; with n_latents 1 also expectation (exact), unordered_set
    traversal_latents: int = positive(10)  # traversal picture: how many latents (largest KL first) to sweep


BINARIZE = ("static", "dynamic", "none")


@dataclass
class DigitsConfig(BatchedDataOptions):
    """scikit-learn's 8x8 digits. ``seed``: split, shuffling and binarisation; ``root``: unused (the images
    ship inside scikit-learn)."""

    eval_batch_size: int = positive(270)  # images per validation / test batch
    binarize: str = choice("static", list(BINARIZE))  # static (threshold) | dynamic (fresh draws) | none
    threshold: float = between(0.5, 0, 1)  # intensity threshold for static binarisation (intensities are /16)
    val_size: int = positive(270)  # validation images, carved from the 1,527 non-test images
    test_size: int = positive(270)  # test images, held out first


@dataclass
class MnistConfig(BatchedDataOptions):
    """MNIST. ``seed``: split, shuffling and binarisation; ``root``: looked in as <root>/mnist,
    <root>/mnist/MNIST/raw, <root>/MNIST/raw."""

    download: bool = True  # fetch the IDX files into <root>/mnist when missing (false: never touch the network)
    batch_size: int = positive(100)  # training images per batch
    eval_batch_size: int = positive(500)  # images per validation / test batch
    binarize: str = choice("dynamic", list(BINARIZE))  # static (threshold) | dynamic (fresh draws) | none
    threshold: float = between(0.5, 0, 1)  # intensity threshold for static binarisation (intensities are /255)
    val_size: int = positive(10000)  # validation images carved from the 60,000 training images


# the folder's entries, each declared once as a spec its class points to: name, class (imported when first
# used), options and what the recipe check needs
def image_size(data_info: dict | None) -> int | None:
    """Pixels of one image (C * H * W), the features a learned baseline reads; None before the data are read."""
    shape = (data_info or {}).get("image_shape")
    return int(math.prod(shape)) if shape else None


def vae_node(cfg: VAEConfig, data_info: dict | None = None) -> StochasticNode:
    """z ~ q(z|x): pathwise-differentiable cost; a learned baseline reads the image."""
    return StochasticNode(kind="continuous", differentiable_cost=True, samples=cfg.n_samples or None,
                          context=True, context_dim=image_size(data_info))


def dvae_node(cfg: DVAEConfig, data_info: dict | None = None) -> StochasticNode:
    """N x K categorical latents scored by one cost (the ELBO), which the decoder reads all at once: a cost per
    variable only when N = 1 (then exact enumeration and sets without replacement fit: expectation,
    unordered_set). cost_function: the model passes the reconstruction cost of any (relaxed) sample to an
    estimator that asks; a learned baseline reads the image."""
    return StochasticNode(kind="categorical", differentiable_cost=True, samples=cfg.n_samples or None,
                          cost_function=True, variables=cfg.n_latents, categories=cfg.n_classes,
                          sample_size=cfg.n_latents * cfg.n_classes, context=True,
                          context_dim=image_size(data_info),
                          hint="per-variable estimators fit model.n_latents=1, binary ones model.n_classes=2")


DVAE_SPEC = MODELS.declare(ModelSpec("dvae", "zoo.models.vae.dvae:DiscreteVAE", DVAEConfig, node=dvae_node,
                                     task="unconditional-image-generation", compiled=("encoder", "decoder")))
VAE_SPEC = MODELS.declare(ModelSpec("vae", "zoo.models.vae.vae:VAE", VAEConfig, node=vae_node,
                                    task="unconditional-image-generation", compiled=("encoder", "decoder")))
DIGITS_SPEC = DATAMODULES.declare(DataSpec("digits", "zoo.models.vae.data:DigitsData", DigitsConfig))
MNIST_SPEC = DATAMODULES.declare(DataSpec("mnist", "zoo.models.vae.data:MnistData", MnistConfig))
