"""Show, Attend and Tell's options (``sat``) and its datamodules' (``shapes``, ``karpathy``): no torch
here, so a recipe's keys are checked before torch and Lightning are imported
(declared below: ``MODELS.declare``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from zoo.data_schema import BatchedDataOptions
from zoo.estimators.capabilities import StochasticNode
from zoo.registry import DATAMODULES, MODELS, DataSpec, ModelSpec
from zoo.schema import EstimatorSpec, at_least, between, choice, estimator_option, positive

MAX_BEAMS = 100  # beams kept per step (training's beam_size, predict's beam= and sbs=)
MAX_LEN = 1000  # words per generated caption (the recipes' captions are tens of words)


TORCHVISION = {  # torchvision encoders (nets.py): name -> (builder, weights enum name, feature dim)
    "vgg16": ("vgg16", "VGG16_Weights", 512),
    "vgg19": ("vgg19", "VGG19_Weights", 512),
    "resnet50": ("resnet50", "ResNet50_Weights", 2048),
    "resnet101": ("resnet101", "ResNet101_Weights", 2048),
    "resnet152": ("resnet152", "ResNet152_Weights", 2048),
}


PAPER_ESTIMATOR = {"name": "reinforce", "baseline": "ema", "decay": 0.9, "entropy_weight": 0.002}


@dataclass
class SATConfig:
    attention: str = field(default="soft", metadata={"choices": ["soft", "hard"]})  # soft | hard (sampled)
    estimator: EstimatorSpec = estimator_option(PAPER_ESTIMATOR)  # hard only: name or {name: ..., options};
    # the paper's: reinforce, EMA baseline 0.9, entropy bonus
    expected_context_prob: float = between(0.0, 0, 1)  # hard: per word, use the expected context with this probability
    expected_context_hold: int = 0  # steps at expected_context_prob before it starts to fall
    expected_context_anneal: int = 0  # >0: then it falls linearly to 0 over this many steps: a
    # continuation from soft to hard attention (samples start where a trained soft attention looks)
    score_cost: str = field(default="sum", metadata={"choices": ["sum", "mean", "reward_to_go", "word"]})
    # hard: the cost weighing log p(s|a). sum: -log p(y|s,a) per caption (L_s); mean: sum / length;
    # reward_to_go: the words from t on (unbiased, less variance); word: its own word (biased; the reference code's)
    hard_decode: str = field(default="argmax", metadata={"choices": ["argmax", "expected"]})  # hard at test
    encoder: str = choice("cnn", ["cnn", *TORCHVISION])  # cnn (shapes) or a torchvision net
    feat_dim: int = positive(128)  # cnn: D of the annotation vectors (torchvision encoders: 512 / 2048)
    cnn_width: int = positive(32)  # cnn: channels of the first stage (then 2x, 4x)
    cnn_stages: int = at_least(3, 3)  # cnn: stride-2 stages; a 64-px canvas gives 8x8 (3) or 4x4 (4) locations
    grid: int = positive(14)  # torchvision encoders: output grid (14 x 14 for 224-px images)
    pretrained_encoder: bool = True  # torchvision: ImageNet weights from the torch hub cache
    freeze_encoder: bool = False  # keep the encoder fixed (eval mode, no gradient)
    encoder_from: Optional[str] = None  # a captioning checkpoint or pretrained name whose encoder weights
    # start this one (the paper's encoder is a fixed pretrained CNN); read when training starts
    embed_dim: int = positive(128)  # word embedding size m
    hidden_dim: int = positive(256)  # LSTM size n
    att_dim: int = positive(128)  # hidden size of the attention MLP f_att
    dropout: float = between(0.5, 0, 1, high_open=True)  # dropout on h_t and on the deep output layer
    gate: bool = True  # gating scalar beta = sigmoid(W h) on the context
    init_state: str = field(default="mean", metadata={"choices": ["mean", "learned"]})  # h_0, c_0: MLP of
    # the mean annotation vector (paper) or learned constants (every word must then come through attention)
    deep_output: bool = True  # p(y) from E y_{t-1} + L_h h_t + L_z z_t (else from h_t only)
    alpha_c: float = 1.0  # lambda of the doubly stochastic regulariser
    optimizer: str = field(default="adam", metadata={"choices": ["adam", "rmsprop"]})  # paper: both
    lr: float = positive(1e-3)  # learning rate (decoder; encoder too when trained from scratch)
    lr_schedule: str = field(default="constant", metadata={"choices": ["constant", "cosine"]})
    # cosine: the learning rate falls to 0 over the run's optimizer steps (the last epochs settle
    # instead of ending wherever a constant step leaves them; see docs/captioning.md, seeds)
    encoder_lr: float = 0.0  # >0: separate learning rate for a pretrained encoder being fine-tuned
    weight_decay: float = 0.0  # L2 penalty
    beam_size: int = between(1, 1, MAX_BEAMS)  # captions for val/test metrics: 1 = greedy, k = beam search
    length_norm: float = 0.0  # beam ranking by log p / length^length_norm (0: plain log p)
    max_decode_len: int = between(0, 0, MAX_LEN)  # longest generated caption (0: the data's max_len + 1)
    n_figure: int = positive(4)  # images in the attention overlay figures

    def __post_init__(self):
        if not 0.0 <= self.expected_context_prob <= 1.0:
            raise ValueError(f"expected_context_prob must be in [0, 1], got {self.expected_context_prob}")
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {self.beam_size}")
        if self.cnn_stages < 3:
            raise ValueError(f"cnn_stages must be >= 3, got {self.cnn_stages}")
        if self.encoder_from is not None and not str(self.encoder_from).strip():
            raise ValueError("encoder_from must be a captioning checkpoint or pretrained name, or null for none")


@dataclass
class ShapesConfig(BatchedDataOptions):
    """Generated scenes of shapes with captions. ``seed``: the scenes, the splits and the shuffling;
    ``root``: unused (the scenes are generated in memory)."""

    n_train: int = positive(3000)  # training scenes (3 references each -> 3x as many training pairs)
    n_val: int = positive(300)  # validation scenes
    n_test: int = positive(500)  # test scenes
    image_size: int = positive(64)  # canvas side in pixels
    # 1..max_objects shapes per scene; at most 3: a caption names at most 3 objects
    max_objects: int = between(3, 1, 3, why="a caption names at most 3 objects")
    max_len: int = positive(20)  # longest caption in words (longer ones are cut)


@dataclass
class KarpathyConfig(BatchedDataOptions):
    """Flickr8k, Flickr30k or COCO in Karpathy's splits. ``seed``: the shuffling; ``root``: the data folder."""

    dataset: str = "flickr8k"  # flickr8k | flickr30k | coco: picks the default file names below
    json: str = ""  # Karpathy split file; default <root>/<dataset>/dataset_<dataset>.json
    image_dir: str = ""  # image folder; default <root>/<dataset>/images (COCO: holds train2014/, val2014/)
    download: bool = True  # fetch caption_datasets.zip into <root> and the flickr8k / coco image zips into
    # <root>/<dataset> when missing (false: never touch the network)
    image_size: int = positive(224)  # images are resized (shorter side) and centre-cropped to this
    min_freq: int = positive(5)  # words seen fewer times in training captions become <unk>
    max_len: int = positive(30)  # longest caption in words (longer ones are cut)
    restval_as_train: bool = True  # COCO's 'restval' images join the training split (Karpathy)
    batch_size: int = positive(32)  # examples per batch
    num_workers: int = 2  # DataLoader workers (JPEG decoding)
    limit_images: int = 0  # >0: use only the first N images of each split (quick experiments)


def cnn_side(image_size: int, stages: int) -> int:
    """Side of the cnn encoder's grid for a square image: each stride-2 stage gives ceil(n / 2)."""
    return -(-image_size // 2 ** stages)


def locations(cfg: SATConfig, data_info: dict | None) -> int | None:
    """L, the attention's locations (the encoder's grid cells); None while the image size is not known (the
    recipe is checked before the data are read)."""
    if cfg.encoder != "cnn":
        return cfg.grid ** 2  # a torchvision encoder pools to grid x grid
    size = (data_info or {}).get("image_size")
    return None if size is None else cnn_side(int(size), cfg.cnn_stages) ** 2


def sat_node(cfg: SATConfig, data_info: dict | None = None) -> StochasticNode | None:
    """Hard attention's location s_t ~ Multinoulli(alpha_t) over the L locations, drawn word by word given the
    earlier words' (sequential); soft attention samples nothing. The caption's NLL is differentiable in the
    (relaxed) attention weights, but couples the words (no enumeration) and gives no baseline features; the
    words' samples are stacked into one, their estimator's extras (relax's Gumbel noise) included. L stated: an
    estimator's layers that read a location's values (relax's control variate) are built at their size with the
    model, before a checkpoint is loaded into them."""
    if cfg.attention != "hard":
        return None
    return StochasticNode(kind="categorical", differentiable_cost=True, sequential=True,
                          categories=locations(cfg, data_info),
                          coupling="a word's location feeds the LSTM state of every later word, so one "
                                   "location's own cost is the rest of the caption's NLL: a decoder rollout "
                                   "for each of the L locations at every word",
                          hint="or model.attention=soft for the exact expected context")


# the folder's entries, each declared once as a spec its class points to: name, class (imported when first
# used), options and what the recipe check needs
SAT_SPEC = MODELS.declare(ModelSpec("sat", "zoo.models.captioning.module:ShowAttendTell", SATConfig, node=sat_node,
                                    monitor=("val/bleu4", "max"), task="image-to-text",
                                    # the CNN only: the decoder's steps run a loop as long as each batch's captions
                                    # and a beam search whose beams end at different steps (a graph per length)
                                    compiled=("encoder",)))


def image_known_info(cfg: KarpathyConfig | ShapesConfig) -> dict:
    """The image side the data's options state: hard attention's locations L, for the estimator check before
    any data are read."""
    return {"image_size": cfg.image_size}


KARPATHY_SPEC = DATAMODULES.declare(DataSpec("karpathy", "zoo.models.captioning.data:KarpathyData", KarpathyConfig,
                                             known_info=image_known_info))
SHAPES_SPEC = DATAMODULES.declare(DataSpec("shapes", "zoo.models.captioning.data:ShapesData", ShapesConfig,
                                           known_info=image_known_info))
