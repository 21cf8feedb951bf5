"""Control variates for the score-function estimator.

For any b that does not depend on the sample z, E[(f(z) - b) grad log p(z)] = E[f(z) grad log p(z)]
because E[grad log p(z)] = grad sum_z p(z) = grad 1 = 0. A b close to E[f] removes most of the
variance. These five are independent of the sample they are used with, so all stay unbiased:
- ``none``: b = 0.
- ``ema``: b <- decay * b + (1 - decay) * mean cost, updated *after* use (Show, Attend and Tell,
  decay 0.9); only updated in training mode.
- ``batch_mean``: mean cost of the *other* samples and batch elements at the same position
  (leave-one-out; the plain mean would include the sample itself and shrink the gradient by 1 - 1/M).
- ``rloo``: mean cost of the other n - 1 samples of the same input (Kool et al. 2019, "Buy 4
  REINFORCE samples, get a baseline for free"); needs n >= 2.
- ``learned``: a small MLP b(context) regressed on the detached cost with MSE (Mnih & Gregor 2014).

The group estimators of language-model RL practice (one group = the n samples of one input) change the
advantage itself, and are biased for grad E[cost] (``tests/estimators/test_estimators_group.py`` shows it by
exact enumeration):
- ``grpo``: (f - mean of the group) / (std of the group + eps), the group's sample std ("DeepSeekMath: Pushing
  the Limits of Mathematical Reasoning in Open Language Models"): dividing by a std computed from the
  samples themselves reweights each group, which changes the direction of the expected gradient; n >= 2.
- ``dr_grpo``: f - mean of the group, the sample's own cost included ("Understanding R1-Zero-Like Training: A
  Critical Perspective"): exactly (n - 1) / n times the leave-one-out advantage, so its expectation is
  (n - 1) / n grad E[cost] (the direction unbiased, the scale not); n >= 2.
- ``reinforce_pp``: (f - mean of the batch) / (std of the batch + eps), over every sample, input and cost
  position of the call ("REINFORCE++: A Simple and Efficient Approach for Aligning Large Language Models"):
  the mean includes the sample itself and the std depends on the samples, so it is biased for a finite batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from zoo.errors import UserError
from zoo.estimators.config import BASELINES

STD_EPS = 1e-4  # added to a group's or batch's std before dividing (TRL's GRPOTrainer's value): equal costs give 0


class Baseline(nn.Module):
    """A control variate for REINFORCE: ``forward(cost, context) -> (b, aux)``; ``advantage(cost, context) ->
    (the advantage that weights grad log p, b, aux)``, ``cost - b`` unless the baseline rescales it (grpo,
    reinforce_pp). This base class is the ``none`` baseline (b = 0); ``make_baseline`` builds the others by their
    option names.

    Examples:
        ```python
        import torch
        from zoo.estimators.baselines import make_baseline

        b, aux = make_baseline("rloo", decay=0.9, context_dim=None, hidden=64)(torch.tensor([[1.0], [3.0]]), None)
        assert b.tolist() == [[3.0], [1.0]] and aux is None   # each sample's baseline: the other's cost
        ```
    """

    def forward(self, cost: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """The baseline for these costs.

        Args:
            cost: ``(n, *C)``, detached: the cost of each sample.
            context: ``(*C, F)`` features of each input, or None (only ``learned`` reads them).

        Returns:
            ``b``, broadcastable to ``(n, *C)`` and detached (the estimator uses ``cost - b``), and ``aux``, a
            scalar loss that trains the baseline's own parameters (``learned``: its MSE to the cost), or None.
        """
        return torch.zeros((), dtype=cost.dtype, device=cost.device), None

    def advantage(self, cost: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        b, aux = self(cost, context)
        return cost - b, b, aux


class EMABaseline(Baseline):
    def __init__(self, decay: float):
        super().__init__()
        self.decay = decay
        self.register_buffer("value", torch.zeros(()))  # the running mean cost (saved in checkpoints)
        self.register_buffer("count", torch.zeros((), dtype=torch.long))  # updates so far

    def forward(self, cost: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor | None]:
        b = self.value.to(device=cost.device, dtype=cost.dtype).clone()  # the value before this batch
        if self.training:
            mean = cost.mean().to(self.value)
            # the first update takes the mean itself; torch.where, not `if`: no host sync on a GPU
            new = torch.where(self.count == 0, mean, self.decay * self.value + (1 - self.decay) * mean)
            self.value.copy_(new)
            self.count += 1
        return b, None


class BatchMeanBaseline(Baseline):
    def forward(self, cost: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor | None]:
        dims = (0, 1) if cost.dim() >= 2 else (0,)  # samples and the first batch dim, per position
        m = 1
        for d in dims:
            m *= cost.shape[d]
        if m < 2:
            return torch.zeros((), dtype=cost.dtype, device=cost.device), None
        total = cost.sum(dim=dims, keepdim=True)
        return (total - cost) / (m - 1), None  # (n, *C) leave-one-out mean


def check_group(cost: Tensor, name: str) -> int:
    n = cost.shape[0]
    if n < 2:
        raise UserError(f"baseline '{name}' needs n >= 2 samples per input (est.sample(dist, n=...)); got n={n}")
    return n


class RLOOBaseline(Baseline):
    def forward(self, cost: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor | None]:
        n = check_group(cost, "rloo")
        return (cost.sum(0, keepdim=True) - cost) / (n - 1), None  # (n, *C)


class GroupMeanBaseline(Baseline):
    """Dr. GRPO's: the mean cost of the group, the sample's own included."""

    def forward(self, cost: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor | None]:
        check_group(cost, "dr_grpo")
        return cost.mean(0, keepdim=True), None  # (1, *C)


class GroupNormBaseline(Baseline):
    """GRPO's: the group's mean, and the advantage divided by the group's sample std."""

    def forward(self, cost: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor | None]:
        check_group(cost, "grpo")
        return cost.mean(0, keepdim=True), None  # (1, *C)

    def advantage(self, cost: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        b, _ = self(cost, context)
        return (cost - b) / (cost.std(0, keepdim=True) + STD_EPS), b, None  # (n, *C)


class BatchNormBaseline(Baseline):
    """REINFORCE++'s: the mean and std of every cost of the call (samples, inputs, positions)."""

    def forward(self, cost: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor | None]:
        return cost.mean(), None

    def advantage(self, cost: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        b = cost.mean()
        return (cost - b) / (cost.std(unbiased=False) + STD_EPS), b, None  # (n, *C)


class LearnedBaseline(Baseline):
    """b = MLP(context): context (*C, F) -> (*C). ``context_dim=None`` builds the first layer lazily
    (nn.LazyLinear: run one batch before wrapping in DDP); ``context_dim=0`` learns a constant."""

    def __init__(self, context_dim: int | None, hidden: int):
        super().__init__()
        self.context_dim = context_dim
        if context_dim == 0:
            self.const = nn.Parameter(torch.zeros(()))
        else:
            first = nn.LazyLinear(hidden) if context_dim is None else nn.Linear(context_dim, hidden)
            self.net = nn.Sequential(first, nn.ReLU(), nn.Linear(hidden, 1))

    def predict(self, cost: Tensor, context: Tensor | None) -> Tensor:
        if self.context_dim == 0:
            return self.const.to(cost.dtype).expand(cost.shape[1:])  # (*C)
        if context is None:
            raise UserError(
                "baseline 'learned' needs features: est.loss(s, cost, context=features) with features "
                "(*C, F); or set context_dim=0 for a learned constant"
            )
        c_shape = tuple(cost.shape[1:])
        if tuple(context.shape[:-1]) != c_shape:
            got = tuple(context.shape)
            raise UserError(f"learned baseline: context must be (*C, F) with C={c_shape}, got {got}")
        return self.net(context.detach()).squeeze(-1).to(cost.dtype)  # (*C)

    def forward(self, cost: Tensor, context: Tensor | None) -> tuple[Tensor, Tensor | None]:
        pred = self.predict(cost, context)  # (*C), with grad to the baseline's parameters
        mse = F.mse_loss(pred.unsqueeze(0).expand_as(cost), cost)
        return pred.detach().unsqueeze(0), mse


def make_baseline(kind: str, decay: float, context_dim: int | None, hidden: int) -> Baseline:
    if kind == "none":
        return Baseline()
    if kind == "ema":
        return EMABaseline(decay)
    if kind == "batch_mean":
        return BatchMeanBaseline()
    if kind == "rloo":
        return RLOOBaseline()
    if kind == "learned":
        return LearnedBaseline(context_dim, hidden)
    if kind == "grpo":
        return GroupNormBaseline()
    if kind == "dr_grpo":
        return GroupMeanBaseline()
    if kind == "reinforce_pp":
        return BatchNormBaseline()
    raise UserError(f"unknown baseline '{kind}'; choose one of {', '.join(BASELINES)}")
