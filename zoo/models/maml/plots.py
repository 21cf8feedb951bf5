"""Figures: the paper's Figure 2 (a sinusoid fitted after 0, 1 and 10 steps from K points) and the
query loss / accuracy against the number of fine-tuning steps, with 95 % intervals."""

from __future__ import annotations

import torch
from matplotlib import colormaps
from matplotlib.figure import Figure
from torch import Tensor

from zoo.models.maml.data import sample_sinusoids


def mean_with_interval(ax, values: Tensor, label: str) -> None:
    """values (tasks, steps + 1): their mean against the step, with a 95 % interval band."""
    values = values.detach().float().cpu()
    mean, ci = values.mean(0), 1.96 * values.std(0) / max(len(values), 2) ** 0.5
    steps = torch.arange(len(mean))  # cpu: for matplotlib
    ax.plot(steps, mean, marker="o", label=label)
    ax.fill_between(steps, mean - ci, mean + ci, alpha=0.25)


def steps_curve(losses: Tensor, metrics: Tensor | None = None, label: str = "MAML"):
    """losses (tasks, steps + 1) [and metrics (tasks, steps + 1)] -> mean +- 95 % CI vs steps."""

    panels = [("query loss", losses)] + ([("query accuracy", metrics)] if metrics is not None else [])
    fig = Figure(figsize=(4.5 * len(panels), 3.4))
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, (name, values) in zip(axes[0], panels):
        mean_with_interval(ax, values, label)
        ax.set_xlabel("gradient steps at test time")
        ax.set_ylabel(f"{name} ({len(values)} tasks)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return fig


def adapted_predictions(model, xs: Tensor, ys: Tensor, grid: Tensor, steps: list[int]) -> dict[int, Tensor]:
    """Predictions of ``model`` on ``grid`` (G, 1) after each number of steps in ``steps``, fine-tuned
    on one task's support points xs, ys (K, 1) by ``model.adapt``."""
    return {s: model.adapt(xs, ys, s)(grid) for s in sorted(steps)}


def sinusoid_adaptation(model, seed: int = 3, steps: tuple[int, ...] = (0, 1, 10), shots: int | None = None,
                        task: tuple[float, float] | None = None, points: tuple[Tensor, Tensor] | None = None):
    """Figure 2 of the paper: the true sine, the K support points, and the fit after 0, 1, 10 steps.
    ``points`` (xs, ys) given by the user replace the sampled task (then no true curve)."""

    info = model.data_info
    device, dtype = model.device, model.dtype
    lo, hi = info.get("x_range", [-5.0, 5.0])
    grid = torch.linspace(lo, hi, 200, device=device, dtype=dtype).unsqueeze(-1)  # (G, 1)
    amp = phase = None
    if points is None:
        g = torch.Generator().manual_seed(seed)  # cpu: one task, moved to the model's device below
        amp = 0.0
        while amp < 1.5 and task is None:  # a task whose sine is visible (draws are deterministic in seed)
            x, y, a, p = sample_sinusoids(1, shots or info.get("shots", 10), g, info.get("amplitude", (0.1, 5.0)),
                                          info.get("phase", (0.0, 3.1416)), (lo, hi))
            amp, phase = float(a[0]), float(p[0])
        if task is not None:
            x, _, _, _ = sample_sinusoids(1, shots or info.get("shots", 10), g, x_range=(lo, hi))
            amp, phase = task
        xs = x[0].to(device, dtype)
        ys = (amp * torch.sin(xs - phase)).to(device, dtype)
    else:
        xs, ys = (t.to(device, dtype) for t in points)
    preds = adapted_predictions(model, xs, ys, grid, list(steps))
    fig = Figure(figsize=(6, 3.8))
    ax = fig.subplots()
    gx = grid.squeeze(-1).cpu()
    if amp is not None:
        ax.plot(gx, amp * torch.sin(gx - phase), "r", lw=2, label="ground truth")
    styles = [":", "--", "-", "-."]
    for i, (s, pred) in enumerate(sorted(preds.items())):
        ax.plot(gx, pred.squeeze(-1).cpu(), styles[i % 4], color="g", alpha=0.5 + 0.5 * i / max(len(preds) - 1, 1),
                label="pre-update" if s == 0 else f"{s} grad step{'s' if s > 1 else ''}")
    ax.plot(xs.squeeze(-1).cpu(), ys.squeeze(-1).cpu(), "^", color="purple", ms=8, label=f"{len(xs)} points used")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def nav2d_paths(paths: dict[int, Tensor], goals: Tensor, returns: Tensor, random_returns: Tensor):
    """The paper's figure 5 for 2-D navigation. Left panels: trajectories after 0, 1, ... policy
    gradient steps, ``paths[k]`` (G, n, H + 1, 2) positions for G goals (G, 2), one panel a goal.
    Right: mean test return vs steps, MAML against a random initialisation (tasks, steps + 1)."""

    G = len(goals)
    fig = Figure(figsize=(3.2 * G + 4.2, 3.4))
    axes = fig.subplots(1, G + 1, squeeze=False)
    shades = colormaps["viridis"](torch.linspace(0.0, 0.85, len(paths)).tolist())  # cpu: colours
    for g, ax in enumerate(axes[0, :G]):
        for (k, pos), colour in zip(sorted(paths.items()), shades):
            for i, traj in enumerate(pos[g].detach().float().cpu()):  # (H + 1, 2)
                ax.plot(traj[:, 0], traj[:, 1], color=colour, lw=1.2, alpha=0.8,
                        label=f"after {k} step{'s' * (k != 1)}" if i == 0 else None)
        gx, gy = goals[g].detach().float().cpu().tolist()
        ax.plot([gx], [gy], marker="*", color="red", ms=14, ls="none", label="goal" if g == 0 else None)
        ax.plot([0], [0], marker="o", color="black", ms=4, ls="none")
        ax.set_xlim(-0.6, 0.6)
        ax.set_ylim(-0.6, 0.6)
        ax.set_aspect("equal")
        ax.set_title(f"goal ({gx:+.2f}, {gy:+.2f})", fontsize=9)
    ax = axes[0, G]
    for name, values in (("MAML", returns), ("random init", random_returns)):
        mean_with_interval(ax, values, name)
    ax.set_yscale("symlog")
    ax.set_xlabel("policy-gradient steps at test time")
    ax.set_ylabel(f"return ({len(returns)} goals)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
