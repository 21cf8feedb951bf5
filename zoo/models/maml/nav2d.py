"""MAML for reinforcement learning on 2-D navigation (Finn et al. 2017, section 5.3, Algorithm 3).

Per task i (a goal), with theta expanded to T per-task copies:
  1. sample n trajectories D_i with pi_theta;  inner loss L_in = the estimator's surrogate on D_i;
  2. theta'_i = theta - alpha grad L_in (one or more steps, new trajectories each step);
  3. sample D'_i with pi_theta'_i;  outer loss = the surrogate on D'_i under theta'_i;
  4. theta <- Adam(grad_theta mean_i outer loss).

Both surrogates come from the estimator registry: ``reinforce`` with the leave-one-out baseline
over the n trajectories (``baseline: rloo``), cost = minus the reward-to-go, so its gradient is the
policy gradient E[sum_t grad log pi(a_t|s_t) (G_t - b_t)].

Which second-order terms are kept: the meta-gradient differentiates the outer surrogate through
theta'_i, i.e. through the inner policy-gradient estimate (the Hessian of the inner surrogate),
as the paper's implementation does. It does not differentiate the *sampling distribution* of the
inner trajectories D_i (they are data, drawn without gradient), so the term
E[grad log pi_theta(D_i) * outer return] of the exact gradient (which DiCE / ProMP add) is dropped.
``first_order: true`` also drops the Hessian term. The paper's outer optimiser is TRPO; here it
is Adam on the outer surrogate (simpler; the comparison against the baselines is unaffected).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributions import Independent, Normal

from zoo.core.memory import created_bytes
from zoo.core.module import ZooModule
from zoo.errors import UserError
from zoo.estimators import reward_to_go
from zoo.models.maml import plots
from zoo.models.maml.config import MAML_RL_SPEC
from zoo.models.maml.nav2d_env import GaussianPolicy, policy_out, rollout


def baseline_features(goals: Tensor, horizon: int) -> Tensor:
    """goals (T, 2) -> (T, H, 3): what a learned baseline b(goal, t) reads; the same for every trajectory of a
    task, so the baseline does not depend on the actions it scores (unbiased)."""
    t = torch.arange(1, horizon + 1, device=goals.device, dtype=goals.dtype) / horizon  # (H,)
    return torch.cat([goals[:, None, :].expand(-1, horizon, -1), t[None, :, None].expand(len(goals), -1, 1)], -1)


class Nav2dMAML(ZooModule):
    """MAML with policy gradients (reinforce + baseline from the estimator registry) on 2-D navigation."""

    spec = MAML_RL_SPEC  # its options, monitor (val/return, max) and node: the policy's actions (nav2d_node)

    def __init__(self, cfg: dict, data_info: dict | None = None):
        super().__init__(cfg, data_info)
        c = self.cfg
        self.check_data(self.data_info)
        self.policy = GaussianPolicy(c.hidden, c.layers, c.init_std)
        self.estimator = self.build_estimator()  # checked against stochastic_node by the platform

    @staticmethod
    def check_data(info: dict) -> None:
        """The navigation tasks: this model's batches are goals it rolls its policy out towards."""
        if info.get("task") != "nav2d":
            raise UserError("maml_rl needs the 2-D navigation datamodule (data_info['task'] = 'nav2d'): use "
                            "data.name=nav2d (few-shot regression and classification are model maml's)")

    # ---- the one place the estimator is used ----------------------------------------------------
    def policy_loss(self, params: dict[str, Tensor], states: Tensor, actions: Tensor, rewards: Tensor,
                    goals: Tensor | None = None) -> Tensor:
        """Surrogate whose gradient is the policy gradient, mean over tasks, trajectories and steps.
        params (T, *shape); states, actions (T, n, H, 2); rewards (T, n, H); goals (T, 2): a learned
        baseline's features (the estimator reads them only when it has one)."""
        mean, std = policy_out(self.policy, params, states)  # (T, n, H, 2), (T, 2)
        dist = Independent(Normal(mean.movedim(1, 0), std[:, None]), 1)  # batch (n, T, H), event (2,)
        sample = self.estimator.observe(dist, actions.movedim(1, 0))  # log-probs (n, T, H)
        cost = -reward_to_go(rewards)  # (T, n, H): minus the reward-to-go
        # per-task scale to unit spread, as rllab's VPG normalises advantages (the paper's inner step
        # alpha = 0.1 assumes it): a positive constant per task, so each task's gradient keeps its direction
        cost = cost / (cost.flatten(1).std(1)[:, None, None] + 1e-8)
        context = None if goals is None else baseline_features(goals.to(cost.dtype), cost.shape[-1])  # (T, H, 3)
        return self.estimator.loss(sample, cost.movedim(1, 0), context=context)

    # ---- adaptation -------------------------------------------------------------------------------
    def expanded(self, T: int) -> dict[str, Tensor]:
        return {k: v.expand(T, *v.shape) for k, v in self.policy.named_parameters()}

    def adapt(self, params: dict[str, Tensor], goals: Tensor, steps: int, create_graph: bool,
              generator: torch.Generator | None = None) -> tuple[dict[str, Tensor], list[Tensor]]:
        """``steps`` policy-gradient steps per task; also the mean return (T,) seen before each step."""
        c, T = self.cfg, len(goals)
        returns = []
        for _ in range(steps):
            states, actions, rewards = rollout(self.policy, params, goals, c.trajectories, c.horizon,
                                               generator=generator)
            returns.append(rewards.sum(-1).mean(1))
            loss = self.policy_loss(params, states, actions, rewards, goals) * T  # task i's loss / T -> its own
            grads = torch.autograd.grad(loss, list(params.values()), create_graph=create_graph)
            # without create_graph the grads carry no graph: theta' = theta - alpha sg(g) (first order)
            params = {k: v - c.inner_lr * g for (k, v), g in zip(params.items(), grads)}
        return params, returns

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.cfg.lr)

    def meta_loss(self, goals: Tensor) -> tuple[Tensor, Tensor, list[Tensor]]:
        """(the meta-loss, the adapted policies' rewards (T, trajectories, horizon), the returns before each step)."""
        c = self.cfg
        params, before = self.adapt(self.expanded(len(goals)), goals, c.inner_steps, not c.first_order)
        states, actions, rewards = rollout(self.policy, params, goals, c.trajectories, c.horizon)
        return self.policy_loss(params, states, actions, rewards, goals), rewards, before

    # the 8-task probe's count over the real peak per task (``zoo.core.memory``; counted_over_peak in
    # benchmarks/results/maml_step_memory_maml_nav2d.json): with the default, steps that fit would be refused
    created_over_peak = 3.2

    def step_bytes(self, datamodule) -> tuple[int, str]:
        """Memory of one meta-training step: that of 8 tasks x tasks / 8 (``zoo.core.memory.check_step_fits``)."""
        tasks, probe = datamodule.cfg.meta_batch, 8
        goals = datamodule.train_set.with_tasks(probe)[0]
        per_task = created_bytes(lambda: self.meta_loss(goals)) / probe
        return int(per_task * tasks), (f"data.meta_batch={tasks} (about {per_task / 1024:.0f} kB a task) or "
                                       f"model.trajectories={self.cfg.trajectories}")

    def estimator_loss(self, goals: Tensor) -> Tensor:
        """A fresh stochastic estimate of the meta-loss (for the gradient-variance probe): new rollouts."""
        return self.meta_loss(goals)[0]

    def estimator_parameters(self):
        """The policy's parameters: their meta-gradient is the estimator's policy gradient."""
        return self.policy.parameters()

    def training_step(self, goals: Tensor, batch_idx: int) -> Tensor:
        loss, rewards, before = self.meta_loss(goals)
        logs = {"train/meta_loss": loss.detach(), "train/return_adapted": rewards.sum(-1).mean()}
        if before:
            logs["train/return_before"] = before[0].mean()
        self.log_train(logs, batch_size=len(goals), prog_bar=("train/return_adapted",))
        return loss

    # ---- evaluation -------------------------------------------------------------------------------
    def per_task_copy(self, source: dict[str, Tensor], T: int) -> dict[str, Tensor]:
        """T detached copies of ``source`` (T, *shape) that autograd can adapt (evaluation)."""
        return {k: v.detach().clone().expand(T, *v.shape).requires_grad_() for k, v in source.items()}

    def returns_curve(self, goals: Tensor, policy_params: dict[str, Tensor] | None = None) -> Tensor:
        """Mean return per task after 0, 1, ..., eval_steps adaptation steps: (T, eval_steps + 1)."""
        c = self.cfg
        g = torch.Generator(device=goals.device).manual_seed(c.eval_seed)
        with torch.inference_mode(False), torch.enable_grad():
            goals = goals.clone()
            source = policy_params if policy_params is not None else dict(self.policy.named_parameters())
            params = self.per_task_copy(source, len(goals))
            params, returns = self.adapt(params, goals, c.eval_steps, create_graph=False, generator=g)
            _, _, rewards = rollout(self.policy, params, goals, c.trajectories, c.horizon, generator=g)
            returns.append(rewards.sum(-1).mean(1))
        return torch.stack(returns, 1)

    def paths(self, goals: Tensor, steps: tuple[int, ...] = (0, 1, 3), n: int = 2) -> dict[int, Tensor]:
        """Positions (G, n, H + 1, 2) of n fresh trajectories per goal after each number of
        adaptation steps in ``steps`` (the same evaluation generator as ``returns_curve``)."""
        c = self.cfg
        g = torch.Generator(device=goals.device).manual_seed(c.eval_seed)
        out, done = {}, 0
        with torch.inference_mode(False), torch.enable_grad():
            goals = goals.clone()
            params = self.per_task_copy(dict(self.policy.named_parameters()), len(goals))
            for k in sorted(steps):
                params, _ = self.adapt(params, goals, k - done, create_graph=False, generator=g)
                done = k
                states, actions, _ = rollout(self.policy, params, goals, n, c.horizon, generator=g)
                last = states[:, :, -1:] + actions[:, :, -1:].clamp(-0.1, 0.1)  # (G, n, 1, 2)
                out[k] = torch.cat([states, last], 2).detach()
        return out

    def random_init_params(self) -> dict[str, Tensor]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.cfg.eval_seed)
            fresh = GaussianPolicy(self.cfg.hidden, self.cfg.layers, self.cfg.init_std)
        return {k: v.to(self.device, self.dtype) for k, v in fresh.named_parameters()}

    def _evaluate(self, goals: Tensor, split: str, batch_idx: int) -> None:
        curve = self.returns_curve(goals)  # (T, steps + 1)
        out = {f"{split}/return_{j}": v for j, v in enumerate(curve.mean(0))}
        out[f"{split}/return"] = curve[:, -1].mean()
        if split == "test":
            n = len(curve)
            for j, v in enumerate(1.96 * curve.std(0) / max(n, 2) ** 0.5):
                out[f"test/return_{j}_ci95"] = v
            rand = self.returns_curve(goals, self.random_init_params())
            out.update({f"test/random_init_return_{j}": v for j, v in enumerate(rand.mean(0))})
            if batch_idx == 0:  # the first test batch: 4 goals' trajectories and the returns

                k = self.cfg.eval_steps
                steps = tuple(sorted({0, min(1, k), k}))  # before, after one step, after all
                self.save_figure("navigation", plots.nav2d_paths(self.paths(goals[:4], steps), goals[:4], curve, rand))
        self.log_dict(out, batch_size=len(goals), sync_dist=True)

    def validation_step(self, goals: Tensor, batch_idx: int) -> None:
        self._evaluate(goals, "val", batch_idx)

    def test_step(self, goals: Tensor, batch_idx: int) -> None:
        self._evaluate(goals, "test", batch_idx)
