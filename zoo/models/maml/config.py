"""MAML's options (``maml``, ``maml_rl``) and its task datamodules' (``sinusoid``, ``omniglot``,
``nav2d``): no torch here, so a recipe's keys are checked before torch and Lightning are imported
(declared below: ``MODELS.declare``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from zoo.data_schema import DataOptions
from zoo.estimators.capabilities import StochasticNode
from zoo.registry import DATAMODULES, MODELS, DataSpec, ModelSpec
from zoo.schema import EstimatorSpec, at_least, between, choice, estimator_option, interval, positive

PATHS = ("auto", "batched", "vmap_grad", "loop")  # meta-gradient implementations (meta.py)
# Adaptation steps per task (the paper: 1 to 10): each is unrolled into the meta-gradient's graph in
# training and run on every validation task every epoch
MAX_STEPS = 1000


@dataclass
class MAMLConfig:
    hidden: int = positive(40)  # MLP (regression) hidden width (the paper: 40)
    layers: int = positive(2)  # MLP hidden layers (the paper: 2)
    filters: int = positive(64)  # conv net filters per layer (classification; the paper: 64)
    inner_lr: float = 0.01  # alpha: inner-loop step size (sinusoid 0.01, Omniglot 0.4)
    inner_steps: int = between(1, 0, MAX_STEPS)  # steps in meta-training (0: the pretrained-on-all-tasks baseline)
    eval_inner_steps: int = between(10, 0, MAX_STEPS)  # validation / test: losses after 0, 1, ..., this many steps
    eval_inner_lr: float = 0.0  # step size for evaluation fine-tuning (0: inner_lr, or the learned ones)
    first_order: bool = False  # FOMAML: no gradient through the inner gradients
    meta_sgd: bool = False  # Meta-SGD: learn a per-parameter inner step size, initialised at inner_lr
    lr: float = positive(1e-3)  # beta: Adam learning rate of the meta-update
    path: str = choice("auto", list(PATHS))  # meta-gradient implementation: auto | batched | vmap_grad | loop
    # (meta.py)
    init: str = choice("torch", ["torch", "paper"])  # MLP weights: PyTorch's defaults, or the paper's
    # code (truncated normal, std 0.01, zero biases); the conv net always keeps PyTorch's
    plot_every_n_epochs: int = 5  # adaptation plots during validation (0: only at test)


@dataclass
class Nav2dMAMLConfig:
    hidden: int = positive(100)  # policy hidden width (the paper: 100)
    layers: int = positive(2)  # policy hidden layers (the paper: 2)
    init_std: float = positive(0.1)  # initial action standard deviation (learned afterwards)
    inner_lr: float = 0.1  # alpha (the paper: 0.1)
    inner_steps: int = between(1, 0, MAX_STEPS)  # adaptation steps in meta-training (0: the pretrained-on-all-goals
    # baseline)
    eval_steps: int = between(3, 0, MAX_STEPS)  # validation / test: returns after 0, 1, ..., this many steps
    first_order: bool = False  # drop the gradient through the inner policy gradient too
    trajectories: int = at_least(20, 2, why="the leave-one-out baseline")  # n: trajectories per task per step
    # (the paper: 20)
    horizon: int = between(100, 1, 10_000)  # H: steps per trajectory (the paper: 100), one Python step each
    lr: float = positive(3e-3)  # Adam learning rate of the meta-update
    estimator: EstimatorSpec = estimator_option({"name": "reinforce", "baseline": "rloo"})  # policy gradient estimator
    eval_seed: int = 0  # seeds the evaluation rollouts and the random-init baseline policy


@dataclass
class SinusoidConfig(DataOptions):
    """Sinusoid regression tasks. ``seed``: the training tasks; ``root``: unused (the tasks are generated)."""

    shots: int = positive(10)  # K: support points per task (the paper: 5 or 10)
    query: int = positive(10)  # query points per training task (the paper uses K)
    eval_query: int = positive(100)  # query points per validation / test task
    meta_batch: int = positive(25)  # T: tasks per meta-iteration (the paper: 25)
    steps_per_epoch: int = positive(1000)  # meta-iterations per Lightning epoch
    val_tasks: int = positive(100)  # fixed validation tasks
    test_tasks: int = positive(600)  # fixed test tasks (the paper's table: 600)
    eval_batch_tasks: int = positive(600)  # tasks per validation / test batch (600: the test split is one batch)
    amplitude: tuple[float, float] = interval((0.1, 5.0))  # A ~ U[lo, hi]
    phase: tuple[float, float] = interval((0.0, math.pi), signed=True)  # phi ~ U[lo, hi]
    x_range: tuple[float, float] = interval((-5.0, 5.0), signed=True)  # x ~ U[lo, hi]
    eval_seed: int = 1234  # validation (eval_seed) and test (eval_seed + 1) tasks


@dataclass
class OmniglotConfig(DataOptions):
    """Omniglot N-way K-shot tasks. ``seed``: the training tasks; ``root``: looked in as <root>/omniglot,
    <root>/omniglot-py, <root>."""

    download: bool = True  # fetch the two zips into <root>/omniglot when missing (false: never touch the network)
    n_way: int = positive(5)  # N: classes per task
    shots: int = positive(1)  # K: support images per class
    query: int = positive(15)  # query images per class
    meta_batch: int = positive(32)  # T: tasks per meta-iteration (the paper: 32 for 5-way, 16 for 20-way)
    steps_per_epoch: int = positive(1000)  # meta-iterations per Lightning epoch
    train_characters: int = positive(1200)  # characters for meta-training; the rest are held out
    rotations: bool = True  # 90/180/270-degree rotations as extra classes
    image_size: int = positive(28)  # images are resized to image_size x image_size
    val_tasks: int = positive(100)  # fixed validation tasks (from the held-out characters)
    test_tasks: int = positive(600)  # fixed test tasks (the paper: 600)
    eval_batch_tasks: int = positive(50)  # tasks per validation / test batch
    split_seed: int = 1  # shuffles the 1,623 characters before the train / held-out split
    eval_seed: int = 1234  # validation (eval_seed) and test (eval_seed + 1) tasks


@dataclass
class Nav2dConfig(DataOptions):
    """2-D navigation goals. ``seed``: the training goals; ``root``: unused (the goals are generated)."""

    meta_batch: int = positive(20)  # T: tasks per meta-iteration (the paper: 20)
    steps_per_epoch: int = positive(50)  # meta-iterations per Lightning epoch
    goal_range: float = between(0.5, 0, 1000, low_open=True, why="a point moves at most 0.1 a step, for at most "
                                "10000 steps")  # goals ~ U[-range, range]^2; 1e30 overflows the rewards
    val_tasks: int = positive(20)  # fixed validation goals
    test_tasks: int = positive(40)  # fixed test goals
    eval_seed: int = 1234  # validation (eval_seed) and test (eval_seed + 1) goals


# the folder's entries, each declared once as a spec its class points to: name, class (imported when first
# used), options and what the recipe check needs
BASELINE_FEATURES = 3  # a learned baseline's input per task and time step: goal (x, y), (t + 1) / horizon


def nav2d_node(cfg: Nav2dMAMLConfig, data_info: dict | None = None) -> StochasticNode:
    """The Gaussian policy's actions along sampled trajectories: the cost (minus the reward-to-go) comes from the
    environment, no gradient through it; n = the trajectories per task (>= 2, so leave-one-out baselines work);
    the rollouts draw the actions (own_samples=False); a learned baseline reads (goal, time), which no action
    changes."""
    return StochasticNode(kind="continuous", differentiable_cost=False, samples=cfg.trajectories or None,
                          own_samples=False, context=True, context_dim=BASELINE_FEATURES)


MAML_UNCOMPILED = ("its meta-gradient calls the net with each task's adapted weights through torch.func "
                   "(functional_call, grad, vmap) or hand-written batched products, never through the module's "
                   "own call, which is what compile compiles")
MAML_SPEC = MODELS.declare(ModelSpec("maml", "zoo.models.maml.module:MAML", MAMLConfig, compiled=MAML_UNCOMPILED))
MAML_RL_SPEC = MODELS.declare(ModelSpec("maml_rl", "zoo.models.maml.nav2d:Nav2dMAML", Nav2dMAMLConfig,
                                        node=nav2d_node, monitor=("val/return", "max"),
                                        compiled=MAML_UNCOMPILED.replace("net", "policy", 1)))
NAV2D_SPEC = DATAMODULES.declare(DataSpec("nav2d", "zoo.models.maml.data:Nav2dData", Nav2dConfig))
OMNIGLOT_SPEC = DATAMODULES.declare(DataSpec("omniglot", "zoo.models.maml.data:OmniglotData", OmniglotConfig))
SINUSOID_SPEC = DATAMODULES.declare(DataSpec("sinusoid", "zoo.models.maml.data:SinusoidData", SinusoidConfig))
