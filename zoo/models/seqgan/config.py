"""SeqGAN's options (``seqgan``) and its datamodules' (``seqgan_oracle``, ``seqgan_text``): no torch
here, so a recipe's keys are checked before torch and Lightning are imported
(declared below: ``MODELS.declare``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from zoo.data_schema import BatchedDataOptions
from zoo.errors import UserError
from zoo.estimators.capabilities import StochasticNode
from zoo.registry import DATAMODULES, MODELS, DataSpec, ModelSpec
from zoo.schema import EstimatorSpec, at_least, between, estimator_option, positive

PAPER_FILTERS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20]  # the discriminator's widths (the paper)
PAPER_COUNTS = [100, 200, 200, 200, 200, 100, 100, 100, 100, 100, 160, 160]  # and its filters per width
MAX_ROLLOUTS = 1000  # see SeqGANConfig.rollouts
MAX_EVAL_SAMPLES = 1_000_000  # see SeqGANConfig.eval_samples
EVAL_SAMPLES_WHY = "100x the paper's 10,000, which take about 20 s on a CPU core"


@dataclass
class SeqGANConfig:
    gen_emb_dim: int = positive(32)  # G embedding size (the paper: 32)
    gen_hidden_dim: int = positive(32)  # G LSTM size (the paper: 32)
    gen_init_std: float = 0.1  # G parameters ~ N(0, std^2) (the reference code: 0.1)
    gen_lr: float = positive(0.01)  # Adam learning rate of MLE pre-training
    adv_lr: float = positive(0.01)  # Adam learning rate of the policy-gradient steps (own optimizer state)
    grad_clip: float = 5.0  # clip G's gradient norm (both phases)
    dis_emb_dim: int = positive(64)  # D embedding size
    dis_filter_sizes: list = positive(PAPER_FILTERS)  # D convolution widths
    dis_num_filters: list = positive(PAPER_COUNTS)  # D filters per width
    dis_dropout: float = between(0.25, 0, 1, high_open=True)  # D dropout before the output layer (keep 0.75)
    dis_lr: float = positive(1e-4)  # D Adam learning rate
    dis_l2: float = 0.2  # L2 penalty (sum of squares / 2) on D's output layer, as in the reference code
    mle_epochs: int = 120  # MLE pre-training epochs of G
    d_pretrain_rounds: int = 50  # D pre-training rounds, each on fresh negatives
    d_pretrain_epochs: int = 3  # D epochs per pre-training round
    adv_iterations: int = 200  # adversarial iterations
    adv_g_steps: int = 1  # G policy-gradient steps per iteration
    adv_d_rounds: int = 5  # D rounds (fresh negatives) per iteration
    adv_d_epochs: int = 3  # D epochs per round
    num_negatives: Optional[int] = at_least(None, 1)  # negatives per D round (None: as many as training sequences)
    # oracle data: D's real examples drawn fresh from the oracle at every D step, not from the fixed
    # training set (which a small recipe's D learns by heart)
    d_fresh_reals: bool = False
    adv_batch_size: int = positive(64)  # sequences sampled per G step
    # Monte Carlo rollouts N per prefix (the paper: 16); a G step scores (seq_len - 1) x N x adv_batch_size
    # sequences. 0: the final D score is every token's reward (score-function estimators; those that
    # backpropagate through D, gumbel_softmax and straight_through, score the whole relaxed sequence)
    rollouts: int = between(16, 0, MAX_ROLLOUTS, why="over 60x the paper's 16; each G step generates "
                            "(seq_len - 1) x rollouts x adv_batch_size sequences")
    # sequences G draws per start (n; the paper: 1); n >= 2 gives the leave-one-out baselines (rloo, reinforce
    # with baseline rloo) their group, and a G step draws group_size x adv_batch_size sequences
    group_size: int = between(1, 1, 1024, why="each G step draws group_size x adv_batch_size sequences")
    rollout_keep: float = between(0.8, 0, 1)  # rollout net update: beta <- keep * beta + (1 - keep) * theta
    batched_rollouts: bool = True  # all prefixes x rollouts in one generation (False: per-step loop)
    d_chunk: int = positive(4096)  # sequences per D call when scoring rollouts (bounds memory)
    estimator: EstimatorSpec = estimator_option({"name": "reinforce", "baseline": "none"})  # G's gradient
    # generator samples for val/nll_oracle (the paper: 10,000) and test/nll_oracle; every validation draws them
    eval_samples: int = between(10000, 1, MAX_EVAL_SAMPLES, why=EVAL_SAMPLES_WHY)
    test_samples: int = between(10000, 1, MAX_EVAL_SAMPLES, why=EVAL_SAMPLES_WHY)
    # samples for val BLEU and for test BLEU and self-BLEU (text data); drawing them costs, scoring is cheap
    bleu_samples: int = between(100, 1, 10_000, why="100x the recipe's 100; drawn at every validation")
    test_bleu_samples: int = between(200, 1, 2_000, why="10x the recipe's 200")
    bleu_refs: int = positive(300)  # held-out references every BLEU sample is scored against
    eval_seed: int = 1234  # seed of the evaluation samples (same G, same number)


@dataclass
class OracleDataConfig(BatchedDataOptions):
    """Sequences sampled from a random LSTM oracle (``batch_size``: the paper's 64). ``seed``: the oracle (when
    not loaded), the samples and the shuffling; ``root``: where the samples are cached (<root>/seqgan_oracle/)."""

    oracle_params: Optional[str] = None  # .npz with the oracle's parameters (keys: see oracle.py)
    vocab_size: int = at_least(5000, 2)  # oracle vocabulary (ignored when oracle_params is given); 1 word: one
    # sequence only, nothing to learn
    emb_dim: int = positive(32)  # oracle embedding size (ignored when oracle_params is given)
    hidden_dim: int = positive(32)  # oracle LSTM size (ignored when oracle_params is given)
    seq_len: int = positive(20)  # tokens per sequence
    num_train: int = positive(10000)  # training sequences (the paper: 10,000)
    num_val: int = positive(1000)  # held-out sequences for validation (G's NLL on real data, D accuracy)
    num_test: int = positive(1000)  # held-out sequences for testing

    def __post_init__(self):
        if self.num_train < self.batch_size:
            raise ValueError(f"num_train ({self.num_train}) must be >= batch_size ({self.batch_size})")


@dataclass
class TextDataConfig(BatchedDataOptions):
    """Sentences of a text file, or of the embedded grammar corpus. ``seed``: the split, the shuffling and the
    embedded corpus; ``root``: where a relative ``path`` is looked up."""

    path: Optional[str] = None  # text file, one sequence per line; None: the embedded grammar corpus
    max_len: int = at_least(20, 2, why="a word and [EOS]")  # tokens per sequence (words + [EOS] + padding)
    min_frequency: int = 1  # vocabulary: words seen fewer times become [UNK]
    lowercase: bool = True  # lower-case lines before splitting into words
    val_fraction: float = between(0.1, 0, 1, low_open=True, high_open=True)  # share of lines for validation
    test_fraction: float = between(0.1, 0, 1, low_open=True, high_open=True)  # share of lines for testing (the BLEU
    # references)
    num_generated: int = positive(10000)  # sentences of the embedded corpus

    def __post_init__(self):
        if self.val_fraction + self.test_fraction >= 1:
            raise ValueError(f"val_fraction + test_fraction must be below 1 (the rest is the training split), got "
                             f"{self.val_fraction} + {self.test_fraction}")


# the folder's entries, each declared once as a spec its class points to: name, class (imported when first
# used), options and what the recipe check needs
ORACLE_MONITOR = ("val/nll_oracle", "min")  # with the oracle's data: the oracle's NLL of G's samples
TEXT_MONITOR = ("val/bleu3", "max")  # with text data (no oracle): BLEU-3 against held-out sentences


def seqgan_node(cfg: SeqGANConfig, data_info: dict | None = None) -> StochasticNode:
    """G's tokens, sampled one by one: by G's own sampler for score-function estimators, by est.sample for
    estimators that draw (own_samples: relax keeps their noise; differentiable_cost: D reads the one-hot or relaxed
    rows through its embedding); group_size sequences per start; a learned baseline reads G's hidden state h_t:
    b(Y_{1:t-1}); a control variate reads one token's V values (sample_size)."""
    n = cfg.group_size
    vocab = (data_info or {}).get("vocab_size")
    return StochasticNode(kind="categorical", differentiable_cost=True, multi_sample=n >= 2, sequential=True,
                          samples=n if n >= 2 else None, own_samples=True, context=True,
                          context_dim=cfg.gen_hidden_dim, sample_size=int(vocab) if vocab else None,
                          categories=int(vocab) if vocab else None,
                          hint="" if n >= 2 else "model.group_size=4 draws 4 sequences per start, where the group "
                          "estimators fit (e.g. model.estimator=rloo)")


def seqgan_monitor(cfg: dict) -> tuple[str, str] | None:
    """The oracle's NLL with the oracle data, BLEU-3 with text (``SeqGAN.__init__``); unknown for other data."""
    return {"seqgan_oracle": ORACLE_MONITOR, "seqgan_text": TEXT_MONITOR}.get(cfg["data"]["name"])


def check_seqgan_run(cfg: dict) -> None:
    """A training run's schedule must have an epoch (the unit tests build models with none): with every
    phase 0 the run would save an untrained G and exit 0."""
    m = cfg["model"]
    if not (m["mle_epochs"] or m["d_pretrain_rounds"] * m["d_pretrain_epochs"] or m["adv_iterations"]):
        raise UserError("the seqgan schedule trains nothing (model.mle_epochs, model.d_pretrain_rounds x "
                        "model.d_pretrain_epochs and model.adv_iterations are all 0): set one of them above 0")


SEQGAN_SPEC = MODELS.declare(ModelSpec("seqgan", "zoo.models.seqgan.module:SeqGAN", SeqGANConfig, node=seqgan_node,
                                       monitor=seqgan_monitor, check_run=check_seqgan_run, task="text-generation",
                                       # D's CNN only: G samples token by token (its step, not its call) and its
                                       # teacher-forced call is one fused LSTM kernel, which compiling leaves as is
                                       compiled=("dis",)))


def oracle_known_info(cfg: OracleDataConfig) -> dict:
    """The vocabulary the oracle's options state (a loaded oracle's is known once its file is read): G's tokens'
    categories, for the estimator check before any data are read."""
    return {"vocab_size": cfg.vocab_size} if cfg.oracle_params is None else {}


SEQGAN_ORACLE_SPEC = DATAMODULES.declare(DataSpec("seqgan_oracle", "zoo.models.seqgan.data:OracleData",
                                                  OracleDataConfig, known_info=oracle_known_info))
SEQGAN_TEXT_SPEC = DATAMODULES.declare(DataSpec("seqgan_text", "zoo.models.seqgan.data:TextData", TextDataConfig))
