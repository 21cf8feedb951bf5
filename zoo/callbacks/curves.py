"""``plots/curves.png``: the training and validation curves of a run's logged losses, drawn when fit ends from
the CSV logger's files (``logs/metrics.csv``, and ``logs/resume-N/metrics.csv`` of each resumed part), for every
model, and logged to W&B / TensorBoard as the models' own figures are. A run without the ``csv`` logger draws
none (W&B and TensorBoard draw their own)."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.loggers import CSVLogger
from matplotlib.figure import Figure


def is_loss(name: str) -> bool:
    """A logged loss, by its name: train/loss, val/nll_oracle, train/g_mle_nll, train/loss_epoch."""
    leaf = name.rsplit("/", 1)[-1]
    return "loss" in leaf or "nll" in leaf


def metrics_files(logs: Path) -> list[Path]:
    """A run's metrics.csv files in the order they were written: the first start's, then each resume's."""
    parts = sorted(logs.glob("resume-*/metrics.csv"), key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0))
    return [p for p in (logs / "metrics.csv", *parts) if p.is_file()]


def logged_losses(files: list[Path]) -> dict[str, list[tuple[int, float]]]:
    """{metric: [(step, value), ...]} of the train/ and val/ losses (``is_loss``) in ``files``, oldest first.
    A resumed part replaces what the part before it logged from the part's first step on: a run killed after
    its last checkpoint logged steps that its resume trains again."""
    curves: dict[str, list[tuple[int, float]]] = {}
    for path in files:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        steps = [int(float(r["step"])) for r in rows if r.get("step")]
        if steps:
            start = min(steps)
            curves = {k: [(s, v) for s, v in points if s < start] for k, points in curves.items()}
        for row in rows:
            if not row.get("step"):
                continue
            for key, value in row.items():
                if key and key.startswith(("train/", "val/")) and is_loss(key) and value not in ("", None):
                    number = float(value)
                    if math.isfinite(number):
                        curves.setdefault(key, []).append((int(float(row["step"])), number))
    return {k: v for k, v in sorted(curves.items()) if v}


def curves_figure(curves: dict[str, list[tuple[int, float]]]) -> Figure:
    """One panel per loss name (train/loss and val/loss share the panel "loss"), a line per logged metric (its
    label the metric's name), against the training step."""
    panels: dict[str, list[str]] = {}
    for key in curves:
        panels.setdefault(key.split("/", 1)[1], []).append(key)
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(4.2 * cols, 3.0 * rows))
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (name, keys) in zip(axes, panels.items()):
        for key in keys:
            steps, values = zip(*curves[key])
            ax.plot(steps, values, label=key, marker="o" if len(steps) < 30 else None, markersize=3)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.subplots_adjust(wspace=0.3, hspace=0.5)  # not tight_layout: it draws the figure once more
    return fig


class Curves(L.Callback):
    """Draws ``plots/curves.png`` when fit ends (the first process only), through the model's ``save_figure``
    where it has one (a ZooModule: logged to W&B and TensorBoard too), else into ``plots_dir``."""

    def __init__(self, plots_dir: Path):
        self.plots_dir = Path(plots_dir)  # where a model without save_figure has its figure written
        self.figure: Figure | None = None  # the figure drawn, once fit has ended (its lines: the logged values)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        csv_loggers = [lg for lg in trainer.loggers if isinstance(lg, CSVLogger)]
        if not csv_loggers:
            return
        csv_loggers[0].save()  # what it holds still unwritten
        curves = logged_losses(metrics_files(Path(csv_loggers[0].root_dir)))
        if curves:
            self.figure = curves_figure(curves)
            save(self.figure, pl_module, self.plots_dir)


def save(fig: Figure, module: Any, plots_dir: Path) -> None:
    """plots/curves.png, by the model's ``save_figure`` where it has one (which logs it too)."""
    if hasattr(module, "save_figure"):
        module.save_figure("curves", fig)
        return
    plots_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(plots_dir / "curves.png", dpi=110, bbox_inches="tight")
