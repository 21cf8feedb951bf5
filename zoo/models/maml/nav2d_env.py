"""2-D point navigation (MAML paper section 5.3), vectorised over tasks and trajectories in torch.

A point starts at the origin; each task has a goal drawn uniformly from [-0.5, 0.5]^2; the
observation is the position, the action a velocity clipped to [-0.1, 0.1] per coordinate, the
reward the negative squared distance to the goal after the move; horizon H = 100. The paper also
ends an episode within 0.01 of the goal; here every episode runs the full horizon (the reward near
the goal is ~0 anyway), so all trajectories have the same length and batch without masks.

The policy is a Gaussian with a state-independent learned log standard deviation and a mean from
the paper's 2 x 100 ReLU network.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap
from torch.utils.data import DataLoader, Dataset

from zoo.core.data import EpochSampler, ResumableLoader, ZooDataModule
from zoo.errors import UserError
from zoo.models.maml.config import Nav2dConfig
from zoo.models.maml.nets import MLP


class GaussianPolicy(nn.Module):
    """pi(a | s) = N(MLP(s), diag exp(log_std)^2).

    The mean's output layer starts near zero (weights x 0.01, bias 0), so every initial policy
    moves by its noise inside the action box. With PyTorch's default init the mean itself can start
    beyond the clip (seed 2: (-0.085, -0.102) at the origin, growing further out): every sampled
    action is then clipped to the same corner, all n trajectories earn the same return, the
    leave-one-out advantages are 0 and the policy gradient is 0 for good (docs/maml.md)."""

    def __init__(self, hidden: int = 100, layers: int = 2, init_std: float = 0.1):
        super().__init__()
        self.mean = MLP(2, 2, hidden, layers)
        out = self.mean.body[-1]  # the last nn.Linear
        with torch.no_grad():
            out.weight.mul_(0.01)
            out.bias.zero_()
        self.log_std = nn.Parameter(torch.full((2,), math.log(init_std)))

    def forward(self, s: Tensor) -> tuple[Tensor, Tensor]:  # (..., 2) -> mean (..., 2), std (2,)
        return self.mean(s), self.log_std.exp()


def policy_out(policy: nn.Module, params: dict[str, Tensor], states: Tensor) -> tuple[Tensor, Tensor]:
    """Per-task parameters (T, *shape) applied to states (T, ..., 2): mean (T, ..., 2), std (T, 2)."""
    return vmap(lambda p, s: functional_call(policy, p, (s,)))(params, states)


@torch.no_grad()
def rollout(policy: nn.Module, params: dict[str, Tensor], goals: Tensor, n: int, horizon: int,
            max_action: float = 0.1, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """n trajectories per task under per-task parameters (T, *shape); goals (T, 2).
    Returns states (T, n, H, 2) (the observation before each action), actions (T, n, H, 2) (as
    sampled, before clipping) and rewards (T, n, H)."""
    T = len(goals)
    pos = goals.new_zeros(T, n, 2)
    states, actions, rewards = [], [], []
    for _ in range(horizon):
        mean, std = policy_out(policy, params, pos)  # (T, n, 2), (T, 2)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        a = mean + std[:, None] * noise
        states.append(pos)
        actions.append(a)
        pos = pos + a.clamp(-max_action, max_action)
        rewards.append(-((pos - goals[:, None]) ** 2).sum(-1))
    return torch.stack(states, 2), torch.stack(actions, 2), torch.stack(rewards, 2)


class Goals(Dataset):
    """Training item (i, epoch) -> T goals from a generator keyed by (seed, epoch, i); fixed
    evaluation sets are one item holding all their goals."""

    def __init__(self, cfg: Nav2dConfig, seed: int, n_items: int, per_item: int, keyed: bool = True):
        self.cfg, self.seed, self.n_items, self.per_item, self.keyed = cfg, seed, n_items, per_item, keyed

    def __len__(self) -> int:
        return self.n_items

    def with_tasks(self, n: int) -> Goals:
        """The same items with n goals each (to measure a step's memory on a few)."""
        return Goals(self.cfg, self.seed, self.n_items, n, self.keyed)

    def __getitem__(self, key) -> Tensor:
        i, epoch = key if isinstance(key, tuple) else (key, 0)
        if not 0 <= int(i) < self.n_items:
            raise IndexError(i)
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch * 100_019 + int(i))  # cpu: datamodule
        r = self.cfg.goal_range
        return torch.empty(self.per_item, 2).uniform_(-r, r, generator=g)  # cpu: goals (T, 2), moved by Lightning


class Nav2dData(ZooDataModule):
    """2-D point navigation tasks (MAML paper 5.3): one goal per task, uniform in [-0.5, 0.5]^2 (generated)."""

    Config = Nav2dConfig

    def setup(self, stage: str | None = None) -> None:
        c = self.cfg
        for name in ("meta_batch", "steps_per_epoch", "val_tasks", "test_tasks"):
            if getattr(c, name) < 1:
                raise UserError(f"data.{name}={getattr(c, name)} must be at least 1")
        self.train_set = Goals(c, c.seed, c.steps_per_epoch, c.meta_batch)
        self.val_set = Goals(c, c.eval_seed, 1, c.val_tasks)
        self.test_set = Goals(c, c.eval_seed + 1, 1, c.test_tasks)

    def info(self) -> dict:
        return {"task": "nav2d", "goal_range": self.cfg.goal_range}

    def train_dataloader(self) -> DataLoader:
        sampler = EpochSampler(len(self.train_set), self.cfg.seed, shuffle=False, tag_epoch=True)  # goals keyed by both
        return ResumableLoader(self.train_set, batch_size=None, sampler=sampler, num_workers=self.cfg.num_workers)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=None, num_workers=self.cfg.num_workers)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, batch_size=None, num_workers=self.cfg.num_workers)
