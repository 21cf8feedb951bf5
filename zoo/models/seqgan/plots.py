"""SeqGAN figures: the NLL-oracle learning curve with its phases."""

from __future__ import annotations

from matplotlib.figure import Figure

from zoo.models.seqgan.schedule import Schedule


def nll_curve_figure(history: list, schedule: Schedule, floor: float | None = None):
    """history: [(epoch, phase, nll_oracle)] as recorded at validation; x = epoch (MLE epochs, then
    adversarial iterations as in the paper's Figure 2, D pre-training collapsed to one point)."""

    fig = Figure(figsize=(6, 3.5))
    ax = fig.subplots()
    colors = {"mle": "tab:blue", "d_pretrain": "tab:gray", "adversarial": "tab:red"}
    for kind, label in (
        ("mle", "MLE pre-training"),
        ("d_pretrain", "D pre-training"),
        ("adversarial", "adversarial"),
    ):
        pts = [(_x(e, schedule), v) for e, k, v in history if k == kind]
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, ".-", color=colors[kind], label=label, markersize=3)
    if floor is not None:
        ax.axhline(floor, color="k", ls="--", lw=1, label="oracle on its own samples")
    ax.set_xlabel("MLE epoch / adversarial iteration")
    ax.set_ylabel("NLL-oracle (nats per token)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _x(epoch: int, s: Schedule) -> float:
    if epoch < s.mle_epochs:
        return epoch + 1
    if epoch < s.adversarial_start:
        return s.mle_epochs + 0.5
    return s.mle_epochs + 1 + (epoch - s.adversarial_start) // s.iteration_epochs
