"""The OOD classifier's options (``ood``) and its datamodules' (``ood_digits``, ``ood_toy2d``,
``ood_images``): no torch here, so a recipe's keys are checked before torch and Lightning are imported
(declared below: ``MODELS.declare``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.data_schema import BatchedDataOptions
from zoo.estimators.capabilities import StochasticNode
from zoo.registry import DATAMODULES, MODELS, DataSpec, ModelSpec
from zoo.schema import EstimatorSpec, between, estimator_option, positive

MODES = ("ce", "confidence", "joint", "boundary_gan")
GAN_MODES = ("joint", "boundary_gan")  # the modes with a generator and a discriminator
MAX_BETA = 1000.0  # beta's upper bound (see OODConfig.beta)


@dataclass
class OptimConfig:
    name: str = field(default="adam", metadata={"choices": ["adam", "sgd"]})  # adam | sgd
    lr: float = positive(1e-3)  # learning rate
    beta1: float = between(0.9, 0, 1, high_open=True)  # Adam's first beta (DCGAN uses 0.5); SGD: momentum
    weight_decay: float = 0.0  # L2 penalty


@dataclass
class OODConfig:
    mode: str = field(default="ce", metadata={"choices": list(MODES)})  # ce | confidence | joint | boundary_gan
    # weight of the KL(U || p) term (the paper: 1 for SVHN, 0.1 for CIFAR-10); at most 1000, where the KL term
    # already outweighs the cross-entropy a thousandfold
    beta: float = between(1.0, 0, MAX_BETA, why="the KL term would outweigh the cross-entropy more than "
                          "a thousandfold; the paper uses 0.1 and 1")
    classifier: str = field(default="cnn", metadata={"choices": ["mlp", "cnn", "vgg13"]})  # classifier net
    width: int = positive(32)  # classifier width (mlp hidden units; cnn first channels; vgg13: 64 = the paper's)
    dropout: float = between(0.0, 0, 1, high_open=True)  # dropout before the classifier's last layer
    generator: str = field(default="mlp", metadata={"choices": ["mlp", "dcgan"]})  # G (joint, boundary_gan)
    discriminator: str = field(default="mlp", metadata={"choices": ["mlp", "dcgan"]})  # D (joint, boundary_gan)
    gan_width: int = positive(256)  # G / D width (mlp hidden units; dcgan base channels, 64 in DCGAN)
    noise_dim: int = positive(32)  # size of G's noise z
    classifier_epochs: int = positive(50)  # boundary_gan: epochs of the classifier alone before it is frozen
    saturating: bool = False  # G's GAN term: log(1 - D(G(z))) as written (True) or -log D(G(z)) (False)
    estimator: EstimatorSpec = estimator_option("reparam")  # how G's noise z ~ N(0, I) is drawn (reparam: pathwise)
    classifier_optim: OptimConfig = field(default_factory=OptimConfig)  # optimizer of the classifier
    generator_optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=2e-4, beta1=0.5))  # of G
    discriminator_optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=2e-4, beta1=0.5))  # of D
    odin_temperatures: list[float] = positive([1.0, 10.0, 100.0, 1000.0])  # ODIN search: T (each > 0)
    odin_eps: list[float] = field(default_factory=lambda: [0.0, 0.0005, 0.001, 0.002, 0.005])  # search: eps (pixels)
    odin_every_n_epochs: int = positive(5)  # run the ODIN search on validation this often (and at the last epoch)
    mahalanobis: bool = True  # also evaluate the Mahalanobis detector (fits on the training split)
    plot_every_n_epochs: int = positive(10)  # write the figures this often during training
    gan_grid_every_n_epochs: int = positive(5)  # joint / boundary_gan: a row of G's samples this often (diagnostics.py)
    # the learning rates of every optimizer times lr_drop at each of these epochs (the paper's code: 0.1 at 60 of 100)
    lr_drop_epochs: list[int] = field(default_factory=list)
    lr_drop: float = between(0.1, 0, 1, low_open=True)  # the factor at each of lr_drop_epochs
    spectral_norm: bool = False  # "Spectral Normalization for Generative Adversarial Networks" on D (GAN modes)
    # joint / boundary_gan: std of Gaussian noise on every input of D, real and G's (pixels; 0: none; instance
    # noise, "Amortised MAP Inference for Image Super-resolution"); ..._anneal: falls linearly to 0 by the end
    instance_noise: float = between(0.0, 0, 1)
    instance_noise_anneal: bool = False
    # joint: G's samples kept for the classifier's KL term (replay.py: a reservoir over the whole of training,
    # "Learning from Simulated and Unsupervised Images through Adversarial Training"), 0: no replay
    replay_size: int = between(0, 0, 1_000_000, why="the buffer is held in memory, a sample an image")
    replay_fraction: float = between(0.5, 0, 1)  # joint, replay_size > 0: share of the classifier's G batch replayed
    # joint, replay_size > 0: D's batch of G's samples replayed too (the same share, drawn from the same buffer),
    # as in the paper the buffer comes from, where it is D's
    replay_d: bool = False
    # GAN modes: R1 penalty gamma / 2 * E ||grad_x D(x)||^2 on real inputs in D's step ("Which Training Methods
    # for GANs do actually Converge?", whose experiments use gamma = 10), 0: none
    r1_gamma: float = between(0.0, 0, 1000, why="the penalty would outweigh D's loss more than a thousandfold")
    # joint: the classifier step's samples come from an exponential moving average of G's weights with this
    # decay per step (~1 / (1 - decay) steps averaged; ~19 steps an epoch on the digits), 0: from G itself
    g_ema: float = between(0.0, 0, 1, high_open=True)

    def __post_init__(self):  # ranges are the fields' (beta and odin_eps: >= 0, the rule for numbers)
        if not self.odin_temperatures or not self.odin_eps:
            raise ValueError("odin_temperatures and odin_eps need at least one value each")
        if self.replay_d and not self.replay_size:
            raise ValueError("replay_d replays the buffer of replay_size: set replay_size > 0 too (e.g. 2048)")


@dataclass
class OODDigitsConfig(BatchedDataOptions):
    """scikit-learn's digits and their OOD sets. ``seed``: the shuffling (the splits and OOD sets are fixed,
    see zoo/models/ood/data.py); ``root``: unused (everything ships inside scikit-learn)."""

    eval_batch_size: int = positive(360)  # images per validation / test batch
    ood_train: bool = False  # also serve the explicit OOD training set (china.jpg patches) for mode=confidence


TOY_BOX = 8.0  # the uniform OOD box is [-TOY_BOX, TOY_BOX]^2 (the 2-D toy)
TOY_BOX_WHY = ("the OOD test sets lie in the box [-8, 8]^2: classes placed or spread past it cover them or leave "
               "them behind")


@dataclass
class Toy2DConfig(BatchedDataOptions):
    """The 2-D toy: two Gaussian classes and OOD points around them. ``seed``: the shuffling (the points
    themselves are fixed); ``root``: unused (the points are generated)."""

    batch_size: int = positive(128)  # training points per batch
    eval_batch_size: int = positive(1000)  # points per validation / test batch
    n_train: int = positive(2000)  # training points (half per class)
    # The OOD sets are fixed (the box [-8, 8]^2, a ring of radius 5): classes placed or spread past the box
    # leave no OOD set to measure against, so separation and std are bounded by the box's half-width
    separation: float = between(2.0, 0, TOY_BOX, why=TOY_BOX_WHY)  # class means (-separation, 0), (+separation, 0)
    std: float = between(0.5, 0, TOY_BOX, low_open=True, why=TOY_BOX_WHY)  # per-coordinate std of each class
    ood_train: bool = False  # also serve an OOD training set (uniform on [-8, 8]^2) for mode=confidence


DATASETS = ("mnist", "fashion_mnist", "cifar10", "svhn")  # ood_images' in-distribution sets (readers.py)


@dataclass
class OODImagesConfig(BatchedDataOptions):
    """MNIST, Fashion-MNIST, CIFAR-10 or SVHN and their OOD sets. ``seed``: the shuffling (the splits are
    fixed); ``root``: the folder holding the datasets (layouts in zoo/models/ood/readers.py)."""

    download: bool = True  # fetch a missing dataset / ODIN folder into root (false: never touch the network)
    dataset: str = field(default="svhn", metadata={"choices": list(DATASETS)})  # in-distribution
    # OOD sets: another dataset, folder:PATH, uniform, gaussian
    ood: list = field(default_factory=lambda: ["uniform", "gaussian"])
    ood_train: bool = False  # serve an explicit OOD training set (ood_train_folder) for mode=confidence
    ood_train_folder: str = ""  # folder of OOD training images (mode=confidence)
    val_size: int = positive(5000)  # validation images carved from the training files
    ood_val_size: int = positive(1000)  # validation images carved from each OOD set (the rest are test images)
    noise_size: int = positive(10000)  # test images of each noise set
    eval_batch_size: int = positive(500)  # images per validation / test batch


# the folder's entries, each declared once as a spec its class points to: name, class (imported when first
# used), options and what the recipe check needs
def ood_node(cfg: OODConfig, data_info: dict | None = None) -> StochasticNode | None:
    """The generator's noise z ~ N(0, I) in the GAN modes (one draw per example; G's loss is a differentiable
    function of z); none otherwise."""
    if cfg.mode not in GAN_MODES:
        return None
    return StochasticNode(kind="continuous", differentiable_cost=True, multi_sample=False,
                          hint="or model.mode=ce / confidence (no GAN)")


OOD_SPEC = MODELS.declare(ModelSpec("ood", "zoo.models.ood.module:OODClassifier", OODConfig, node=ood_node,
                                    monitor=("val/acc", "max"), task="image-classification",
                                    compiled=("classifier", "generator", "discriminator")))  # the GAN's if any
OOD_DIGITS_SPEC = DATAMODULES.declare(DataSpec("ood_digits", "zoo.models.ood.data:OODDigits", OODDigitsConfig))
OOD_IMAGES_SPEC = DATAMODULES.declare(DataSpec("ood_images", "zoo.models.ood.data:OODImages", OODImagesConfig))
OOD_TOY2D_SPEC = DATAMODULES.declare(DataSpec("ood_toy2d", "zoo.models.ood.data:OODToy2D", Toy2DConfig))
