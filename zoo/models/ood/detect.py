"""OOD detectors, detection metrics and temperature scaling.

Detectors come from ``pytorch-ood`` (maximum softmax, ODIN's input perturbation, energy,
Mahalanobis). pytorch-ood's outlier scores are *larger for outliers*; the zoo reports
*in-distribution scores* (larger = more in-distribution, as in Hendrycks & Gimpel and the paper),
so every score here is the negated library score:

- ``msp``: max_k softmax(f(x))_k. Needs no OOD data.
- ``odin``: max_k softmax(f(x~)/T)_k with x~ = x - eps * sign(-grad_x log S_yhat(x; T)). T and eps are
  tuned on validation OOD data (the ODIN paper's protocol), so ODIN *does* see OOD data to tune.
- ``energy``: T logsumexp(f(x)/T) with T = 1 (Liu et al. 2020): no OOD data, no tuning.
- ``mahalanobis``: -min_k Mahalanobis distance of the classifier's features to class means with a
  shared covariance fitted on the training split (Lee et al. 2018b, without input preprocessing or
  feature ensembles): needs training data, no OOD data.

Metrics (the paper's, in-distribution = positive class), computed with torchmetrics' ROC / AUROC /
average precision on the scores' dense ranks scaled into [0, 1] (``unit_scores``): torchmetrics passes
any score outside [0, 1] through a sigmoid, which in float32 is exactly 1.0 above about 16.6, so large
energies would tie; ranks keep every order and every tie, and the metrics depend on the order alone.
pytorch-ood's ``OODMetrics`` takes OOD as the positive class and reports FPR at 95 % TPR *of OOD
samples*, a different operating point than the paper's TNR at 95 % TPR *of in-distribution samples*,
so we compute that one from the ROC ourselves:

- ``tnr95``: fraction of OOD rejected at the threshold that accepts 95 % of in-distribution;
- ``auroc``; ``aupr_in`` (in-distribution positive); ``aupr_out`` (OOD positive, scores negated);
- ``det_acc``: max over thresholds of 0.5 * TPR + 0.5 * TNR.
"""

from __future__ import annotations

import warnings

import torch
from pytorch_ood.detector import EnergyBased, Mahalanobis, MaxSoftmax, odin_preprocessing
from torch import Tensor, nn
from torchmetrics.functional.classification import (
    binary_auroc,
    binary_average_precision,
    binary_roc,
    multiclass_calibration_error,
)


def msp_score(logits: Tensor) -> Tensor:
    return -MaxSoftmax.score(logits)  # (B,)


def energy_score(logits: Tensor, t: float = 1.0) -> Tensor:
    return -EnergyBased.score(logits, t=t)  # (B,)


def odin_score(model: nn.Module, x: Tensor, temperature: float, eps: float) -> Tensor:
    """ODIN on a batch (works under inference mode: pytorch-ood leaves it for the input gradient)."""
    with warnings.catch_warnings():  # it warns under inference mode, then leaves it for the gradient
        warnings.filterwarnings("ignore", message="ODIN not compatible with inference mode")
        x_hat = odin_preprocessing(model, x, eps=eps, temperature=temperature) if eps > 0 else x
    with torch.no_grad():
        return -MaxSoftmax.score(model(x_hat), t=temperature)  # (B,)


class MahalanobisScorer:
    """Class means and shared covariance of features (B, F), fitted once; score = negated distance."""

    def __init__(self, features: Tensor | None, labels: Tensor | None):
        self.detector = Mahalanobis(None)
        if features is not None:
            self.detector.fit_features(features.float(), labels)

    @classmethod
    def from_gaussians(cls, means: Tensor, precision: Tensor) -> MahalanobisScorer:
        """A scorer from fitted class means (K, F) and shared precision (F, F)."""
        scorer = cls(None, None)
        scorer.detector.mu, scorer.detector.precision = means.float(), precision.float()
        return scorer

    @property
    def means(self) -> Tensor:
        return self.detector.mu  # (K, F)

    @property
    def precision(self) -> Tensor:
        return self.detector.precision  # (F, F)

    def __call__(self, features: Tensor) -> Tensor:
        return -self.detector.predict_features(features.float())  # (B,)


def unit_scores(scores: Tensor) -> Tensor:
    """Scores (N,) -> their dense ranks scaled into [0, 1], float64: the same order and the same ties,
    and no score for torchmetrics to squash with its sigmoid (distinct ranks stay distinct in float64)."""
    distinct, rank = torch.unique(scores, return_inverse=True)  # rank: (N,) index into the sorted distinct values
    return rank.double() / max(len(distinct) - 1, 1)


def roc_inputs(score_in: Tensor, score_out: Tensor) -> tuple[Tensor, Tensor]:
    """(in-distribution scores, OOD scores) -> (scores in [0, 1], (N,) float64; target, 1 = in, (N,) long)."""
    scores = unit_scores(torch.cat([score_in, score_out]))  # in their own dtype: a float32 cast could tie them
    target = torch.cat([torch.ones_like(score_in), torch.zeros_like(score_out)]).long()
    return scores, target


def detection_metrics(score_in: Tensor, score_out: Tensor) -> dict[str, float]:
    """The paper's metrics for one OOD set; scores are in-distribution scores (higher = in), any range."""
    scores, target = roc_inputs(score_in, score_out)
    fpr, tpr, _ = binary_roc(scores, target)
    tnr = 1 - fpr
    at95 = tpr >= 0.95
    return {
        "tnr95": float(tnr[at95].max()),
        "auroc": float(binary_auroc(scores, target)),
        "aupr_in": float(binary_average_precision(scores, target)),
        "aupr_out": float(binary_average_precision(1 - scores, 1 - target)),
        "det_acc": float((0.5 * tpr + 0.5 * tnr).max()),
    }


def fit_temperature(logits: Tensor, labels: Tensor, max_iter: int = 100) -> float:
    """Temperature scaling ("On Calibration of Modern Neural Networks", Guo et al. 2017): argmin_T
    NLL(softmax(logits / T), labels) by L-BFGS on log T (so T stays positive). The paper derives softmax with a
    temperature as the maximum-entropy distribution with a fixed expected score; scaling by T keeps the argmax,
    so accuracy is unchanged."""
    logits, labels = logits.detach().float(), labels.detach()
    log_t = torch.zeros((), device=logits.device, requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=0.1, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(logits / log_t.exp(), labels)
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    return float(log_t.detach().exp().clamp(T_MIN, T_MAX))


T_MIN, T_MAX = 0.05, 100.0  # the fitted temperature's range; with every prediction right the NLL falls with T
# to 0 and the fit stops where its steps vanish (small margins: at T_MIN)


def calibration(logits: Tensor, labels: Tensor, temperature: float = 1.0, n_bins: int = 15) -> dict[str, float]:
    """Accuracy, NLL and expected calibration error (15 equal-width bins, torchmetrics)."""
    probs = (logits / temperature).softmax(-1)
    K = logits.shape[-1]
    return {
        "ece": float(multiclass_calibration_error(probs, labels, num_classes=K, n_bins=n_bins)),
        "nll": float(nn.functional.cross_entropy(logits / temperature, labels)),
        "acc": float((logits.argmax(-1) == labels).float().mean()),
    }


def reliability_bins(probs: Tensor, labels: Tensor, n_bins: int = 15) -> tuple[Tensor, Tensor, Tensor]:
    """Per confidence bin: (mean confidence, accuracy, count) — the reliability diagram's bars."""
    conf, pred = probs.max(-1)
    correct = (pred == labels).to(conf.dtype)
    idx = (conf * n_bins).long().clamp(max=n_bins - 1)
    count = conf.new_zeros(n_bins).index_add_(0, idx, torch.ones_like(conf))  # (n_bins,) in probs' device and dtype
    conf_sum = conf.new_zeros(n_bins).index_add_(0, idx, conf)
    acc_sum = conf.new_zeros(n_bins).index_add_(0, idx, correct)
    safe = count.clamp(min=1)
    return conf_sum / safe, acc_sum / safe, count
