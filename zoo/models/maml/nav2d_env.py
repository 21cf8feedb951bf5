"""2-D point navigation (MAML paper section 5.3), vectorised over tasks and trajectories in torch.

A point starts at the origin; each task has a goal drawn uniformly from [-0.5, 0.5]^2; the
observation is the position, the action a velocity clipped to [-0.1, 0.1] per coordinate, the
reward the negative squared distance to the goal after the move; horizon H = 100. The paper also
ends an episode within 0.01 of the goal; here every episode runs the full horizon (the reward near
the goal is ~0 anyway), so all trajectories have the same length and batch without masks.

The policy is a Gaussian with a state-independent learned log standard deviation and a mean from
the paper's 2 x 100 ReLU network. The goals' datamodule (``Nav2dData``) is data.py's.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

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
