"""Estimator diagnostics: bias and variance of gradient estimates on problems with known gradients.

1. The worked example of Xu's lecture notes "Some new and interesting research using Softmax":
   minimise E[z^2], z ~ N(a theta + b, 1). The exact gradient is
   d/dtheta (mu^2 + 1) = 2 a (a theta + b). REINFORCE estimates it by a z^2 (z - mu), the
   re-parameterisation by 2 a (a theta + b + eps): same mean, very different variance.
2. A categorical with K = 5 and cost f(y) = (y . v - t)^2 (a fixed cost per category on one-hots,
   nonlinear in relaxed samples), gradient w.r.t. the logits, exact by enumeration.
3. Three binary variables (two categories each, logits (0, phi_i)) sharing one cost
   f(b) = (b . w - t)^2, gradient w.r.t. phi, exact over the 8 configurations: where the
   binary-only estimators (arm, disarm) run beside the categorical ones.

Each draw is an independent estimate; draws are batched (one parameter copy per draw), so the
whole table takes well under a second.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from matplotlib.figure import Figure
from torch.distributions import Categorical, Normal

from zoo.errors import UserError
from zoo.estimators.base import get_estimator, list_estimators
from zoo.paths import make_folder

A, B = 2.0, 3.0  # the lecture notes' a = 2, b = 3
CAT_LOGITS = [1.0, 0.5, 0.0, -0.5, -1.0]  # the categorical example's logits
CAT_VALUES = [0.0, 1.0, 2.0, 3.0, 4.0]  # v: cost on category k is (v_k - t)^2
CAT_TARGET = 1.3  # t
GAUSSIAN_SPECS = [  # (label, estimator spec, samples per estimate or None for the estimator default)
    ("reparam", "reparam", 1),
    ("reinforce", "reinforce", 1),
    ("reinforce+ema", {"name": "reinforce", "baseline": "ema"}, 1),
    ("reinforce+batch_mean", {"name": "reinforce", "baseline": "batch_mean"}, 1),
    ("reinforce (n=2)", "reinforce", 2),
    ("rloo (n=2)", "rloo", 2),
]
CAT_EXTRA = [  # variants shown besides every registered estimator with its defaults
    ("reinforce+ema", {"name": "reinforce", "baseline": "ema"}),
    ("reinforce+batch_mean", {"name": "reinforce", "baseline": "batch_mean"}),
    ("gumbel_softmax tau=0.3", {"name": "gumbel_softmax", "tau": 0.3}),
    ("straight_through tau=0.3", {"name": "straight_through", "tau": 0.3}),
    ("rloo n=4", {"name": "rloo", "n": 4}),
    ("unordered_set n=4", {"name": "unordered_set", "n": 4}),
]
BIN_PHI = [0.4, -0.7, 1.5]  # the binary example's logits of b = 1
BIN_WEIGHTS = [1.0, -2.0, 0.5]  # w: cost (b . w - t)^2
BIN_TARGET = 0.3  # t
BIN_EXTRA = [("rloo n=4", {"name": "rloo", "n": 4}), ("disarm n=4", {"name": "disarm", "n": 4})]
WARMUP = 20  # calls before measuring, so stateful baselines (EMA) are in their steady state
TRAIN_STEPS = 300  # optimizer steps for an estimator's own parameters first (relax's control variate)


def gaussian_draws(spec: Any, theta: float, draws: int, n: int | None, warmup: int = WARMUP) -> torch.Tensor:
    """(draws,) independent gradient estimates d/dtheta E[z^2] from estimator ``spec``."""
    est = get_estimator(spec)
    for i in range(warmup + 1):
        th = torch.full((draws,), float(theta), requires_grad=True)  # cpu: the CLI's diagnostic; one theta per draw
        s = est.sample(Normal(A * th + B, 1.0), n)
        loss = est.loss(s, s.value**2)  # cost (n, draws)
        if i == warmup:
            (g,) = torch.autograd.grad(loss, th)
            return g * draws  # loss averages over draws


def categorical_cost(value: torch.Tensor) -> torch.Tensor:
    v = torch.tensor(CAT_VALUES, dtype=value.dtype, device=value.device)
    return (value @ v - CAT_TARGET) ** 2  # (n, draws)


def categorical_logits_batch(draws: int) -> torch.Tensor:
    """(draws, K) leaf copies of the example's logits, one per independent estimate."""
    return torch.tensor(CAT_LOGITS).expand(draws, -1).clone().requires_grad_()  # cpu: the CLI's diagnostic


def binary_cost(value: torch.Tensor) -> torch.Tensor:
    """(n, draws, 3, 2) one-hots (or relaxed ones) -> (n, draws): b_i is category 1's value."""
    w = torch.tensor(BIN_WEIGHTS, dtype=value.dtype, device=value.device)
    return (value[..., 1] @ w - BIN_TARGET) ** 2


def binary_phi_batch(draws: int) -> torch.Tensor:
    """(draws, 3) leaf copies of the binary example's phi."""
    return torch.tensor(BIN_PHI).expand(draws, -1).clone().requires_grad_()  # cpu: the CLI's diagnostic


def binary_dist(phi: torch.Tensor) -> Categorical:
    return Categorical(logits=torch.stack([torch.zeros_like(phi), phi], -1))  # (draws, 3) variables, K = 2


PROBLEMS = {  # name -> (leaf parameters for a batch of draws, their distribution, the cost of a sample's value)
    "categorical": (categorical_logits_batch, lambda logits: Categorical(logits=logits), categorical_cost),
    "binary": (binary_phi_batch, binary_dist, binary_cost),
}


def train_parameters(est: Any, problem: str = "categorical", steps: int = TRAIN_STEPS, batch: int = 256) -> None:
    """An estimator with parameters of its own (relax's control variate) as it is after some training:
    Adam (lr 0.01) on the gradient its loss gives them, on the problem it is measured on."""
    params = [p for p in est.parameters() if p.requires_grad]
    if not params:
        return
    leaves, dist, cost = PROBLEMS[problem]
    opt = torch.optim.Adam(params, lr=1e-2)
    for _ in range(steps):
        s = est.sample(dist(leaves(batch)))
        opt.zero_grad()
        est.loss(s, cost(s.value)).backward()
        opt.step()


def categorical_draws(spec: Any, draws: int, warmup: int = WARMUP,
                      problem: str = "categorical") -> tuple[torch.Tensor, int]:
    """(draws, P) gradient estimates w.r.t. the problem's parameters (the K logits, or the 3 phi) and
    the number of cost evaluations per estimate (n, K for expectation); raises UserError if the
    estimator does not handle the problem's distribution."""
    est = get_estimator(spec)
    # a plugin's sample() may not refuse a categorical itself: its declared capabilities do
    if est.capabilities is not None and est.capabilities.distributions == "continuous":
        raise UserError(f"{spec} handles continuous distributions, and the {problem} problem's are discrete")
    leaves, dist, cost = PROBLEMS[problem]
    train_parameters(est, problem)
    for i in range(warmup + 1):
        params = leaves(draws)
        s = est.sample(dist(params))
        loss = est.loss(s, cost(s.value))
        if i == warmup:
            (g,) = torch.autograd.grad(loss, params)
            return g * draws, s.n


def categorical_exact() -> torch.Tensor:
    logits = torch.tensor(CAT_LOGITS, dtype=torch.float64, requires_grad=True)  # cpu: exact reference, float64
    cost = categorical_cost(torch.eye(len(CAT_LOGITS), dtype=torch.float64, device=logits.device))  # (K,)
    (g,) = torch.autograd.grad((logits.softmax(-1) * cost).sum(), logits)
    return g.float()


def binary_exact() -> torch.Tensor:
    phi = torch.tensor(BIN_PHI, dtype=torch.float64, requires_grad=True)  # cpu: exact reference, float64
    values = torch.tensor([0.0, 1.0], dtype=phi.dtype, device=phi.device)
    bits = torch.cartesian_prod(*[values] * len(BIN_PHI))  # (8, 3): every configuration
    prob = (torch.sigmoid(phi) ** bits * torch.sigmoid(-phi) ** (1 - bits)).prod(-1)  # (8,)
    cost = binary_cost(torch.stack([1 - bits, bits], -1))  # (8,)
    (g,) = torch.autograd.grad((prob * cost).sum(), phi)
    return g.float()


def estimator_rows(specs: list, draws: int, warmup: int, exact: torch.Tensor, problem: str) -> list[dict]:
    """One row per estimator that handles the problem: |bias|, its standard error, variance (trace)."""
    rows = []
    for label, spec in specs:
        try:
            g, n = categorical_draws(spec, draws, warmup, problem)  # (draws, P)
        except UserError:
            continue  # not an estimator for this distribution (reparam; arm on K = 5)
        est = get_estimator(spec)
        var = g.var(0) if draws > 1 else torch.zeros_like(g[0])
        bias = g.mean(0) - exact
        rows.append({"estimator": label, "n": n, "unbiased": est.unbiased,
                     "bias_norm": float(bias.norm()), "stderr": float((var.sum() / draws).sqrt()),
                     "variance": float(var.sum()), "mean": g.mean(0).tolist()})
    return rows


def run(theta: float = 0.0, draws: int = 10000, seed: int = 0, warmup: int = WARMUP) -> dict:
    torch.manual_seed(seed)
    exact = 2 * A * (A * theta + B)
    rows = []
    for label, spec, n in GAUSSIAN_SPECS:
        g = gaussian_draws(spec, theta, draws, n, warmup)
        var = float(g.var())
        rows.append({"estimator": label, "n": n, "mean": float(g.mean()), "bias": float(g.mean()) - exact,
                     "stderr": math.sqrt(var / draws), "variance": var, "_draws": g})
    registered = [(name, name) for name in list_estimators()]
    exact_cat, exact_bin = categorical_exact(), binary_exact()
    cat_rows = estimator_rows(registered + CAT_EXTRA, draws, warmup, exact_cat, "categorical")
    bin_rows = estimator_rows(registered + BIN_EXTRA, draws, warmup, exact_bin, "binary")
    return {
        "gaussian": {"a": A, "b": B, "theta": theta, "draws": draws, "seed": seed, "exact": exact,
                     "rows": rows},
        "categorical": {"logits": CAT_LOGITS, "values": CAT_VALUES, "target": CAT_TARGET, "draws": draws,
                        "exact": exact_cat.tolist(), "rows": cat_rows},
        "binary": {"phi": BIN_PHI, "weights": BIN_WEIGHTS, "target": BIN_TARGET, "draws": draws,
                   "exact": exact_bin.tolist(), "rows": bin_rows},
    }


def format_table(result: dict) -> str:
    g = result["gaussian"]
    lines = [f"Lecture-notes example (Xu, softmax): d/dtheta E[z^2], z ~ N(a*theta+b, 1), a={g['a']:g}, "
             f"b={g['b']:g}, "
             f"theta={g['theta']:g}; exact = 2a(a*theta+b) = {g['exact']:.4f}; {g['draws']} draws",
             f"{'estimator':24s} {'n':>3s} {'mean':>10s} {'bias':>9s} {'std.err':>8s} {'variance':>11s}"]
    for r in g["rows"]:
        lines.append(f"{r['estimator']:24s} {r['n']:3d} {r['mean']:10.4f} {r['bias']:9.4f} "
                     f"{r['stderr']:8.4f} {r['variance']:11.3f}")
    c, b = result["categorical"], result["binary"]
    exact = ", ".join(f"{x:.4f}" for x in c["exact"])
    exact_bin = ", ".join(f"{x:.4f}" for x in b["exact"])
    for title, rows in [
        (f"Categorical K={len(c['logits'])}, cost (y.v - {c['target']})^2, v={c['values']}, gradient w.r.t. logits; "
         f"exact = [{exact}]; {c['draws']} draws", c["rows"]),
        (f"{len(b['phi'])} binary variables, phi={b['phi']}, one cost (b.w - {b['target']})^2, w={b['weights']}, "
         f"gradient w.r.t. phi; exact = [{exact_bin}]; {b['draws']} draws", b["rows"]),
    ]:
        lines += ["", title,
                  f"{'estimator':26s} {'n':>3s} {'claims':>9s} {'|bias|':>8s} {'std.err':>8s} {'variance':>10s}"]
        for r in rows:
            claim = "unbiased" if r["unbiased"] else "biased"
            lines.append(f"{r['estimator']:26s} {r['n']:3d} {claim:>9s} {r['bias_norm']:8.4f} "
                         f"{r['stderr']:8.4f} {r['variance']:10.4f}")
    lines.append("|bias| = norm of (mean estimate - exact); std.err = its Monte-Carlo standard error "
                 "(|bias| within ~2-3 std.err is consistent with zero); variance = trace of the covariance.")
    return "\n".join(lines)


def plot(result: dict, path: str) -> None:

    g, c = result["gaussian"], result["categorical"]
    fig = Figure(figsize=(17, 4.8))
    ax1, ax2, ax3 = fig.subplots(1, 3)
    draws = [r["_draws"] for r in g["rows"] if "_draws" in r]
    lo = min(float(d.quantile(0.002)) for d in draws)  # the central 99.6% of every estimator's draws
    hi = max(float(d.quantile(0.998)) for d in draws)
    for r in g["rows"]:
        if "_draws" in r:
            ax1.hist(r["_draws"].numpy(), bins=120, range=(lo, hi), histtype="step",
                     density=True, label=f"{r['estimator']} (var {r['variance']:.3g})")
    ax1.axvline(g["exact"], color="k", ls="--", label=f"exact {g['exact']:.2f}")
    ax1.set_yscale("log")
    ax1.set_xlabel("gradient estimate")
    ax1.set_title(f"d/dtheta E[z^2], z ~ N({g['a']:g} theta + {g['b']:g}, 1), theta={g['theta']:g}")
    ax1.legend(fontsize=7)
    variance_panel(ax2, c["rows"], f"categorical K={len(c['logits'])}: gradient w.r.t. logits")
    variance_panel(ax3, result["binary"]["rows"], f"{len(result['binary']['phi'])} binary variables, one cost: "
                   "gradient w.r.t. phi")
    fig.tight_layout()
    make_folder(Path(path).parent)  # --out may name a new folder, as every zoo output may
    fig.savefig(path, dpi=110)


def variance_panel(ax, rows: list[dict], title: str) -> None:
    """Bars: each estimator's variance (trace); dots: its squared bias (Monte-Carlo noise if unbiased)."""
    x = range(len(rows))
    ax.bar(x, [max(r["variance"], 1e-12) for r in rows], color="tab:blue", label="variance (trace)")
    ax.scatter(x, [max(r["bias_norm"] ** 2, 1e-12) for r in rows], color="tab:red", zorder=3,
               label="|mean - exact|^2 (MC noise for unbiased ones)")
    ax.set_yscale("log")
    ax.set_xticks(list(x))
    ax.set_xticklabels([r["estimator"] for r in rows], rotation=60, ha="right", fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)


def strip_private(result: dict) -> dict:
    out = {k: dict(v) for k, v in result.items()}
    rows = out["gaussian"]["rows"]
    out["gaussian"]["rows"] = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
    return out
