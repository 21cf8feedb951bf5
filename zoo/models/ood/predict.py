"""The OOD classifier's inference API (a mixin of ``OODClassifier``) and ``python -m zoo.predict`` for it.

    model = zoo.load("ood-digits-joint")
    x = model.preprocess(["a.png"])   # files / PIL / numpy of any size -> (1, 1, 8, 8), as model.transforms() says
    model.predict_proba(x)                  # (1, 10) softmax(logits / T), T the fitted temperature
    d = model.detect(x, detector="msp")     # d.labels, d.confidence, d.score, d.is_in (1,) each

``is_in`` compares the detector's score with the threshold chosen on the validation data: the score that
accepts 95 % of the validation in-distribution inputs (the TPR of the paper's TNR at 95 % TPR). The
thresholds are buffers fitted at each validation (``msp_threshold``, ``odin_threshold``,
``energy_threshold``; ``mahalanobis_threshold`` with the ODIN search) and travel in checkpoints and
pretrained files. A model saved before a detector's threshold existed (the released ``ood-digits-*`` have
only ``msp_threshold``) loads with that buffer unset (nan); the first ``detect`` with that detector then
computes it the same way, on the validation split of the data the model was trained on (rebuilt from the
data options stored with it), and keeps it.

Mahalanobis ("A Simple Unified Framework for Detecting Out-of-Distribution Samples and Adversarial
Attacks") needs the class means and the shared precision matrix of the classifier's features on the
training split: buffers ``mahalanobis_means`` (K, F) and ``mahalanobis_precision`` (F, F), fitted with the
ODIN search in validation, or on first use from the training split like a missing threshold.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from zoo.core.inputs import image_batch
from zoo.core.transforms import DIGITS_DATA, ImageTransforms, card_transforms, transform_batch
from zoo.errors import UserError
from zoo.models.ood import detect as det
from zoo.models.ood.data import as_float
from zoo.registry import DATAMODULES, loaded_config
from zoo.schema import validate

API_DETECTORS = ("msp", "odin", "energy", "mahalanobis")
LATE_THRESHOLDS = ("odin_threshold", "energy_threshold", "mahalanobis_threshold")  # not in every checkpoint
GAUSSIANS = ("mahalanobis_means", "mahalanobis_precision")  # (K, F) and (F, F); not in every checkpoint
TPR = 0.95  # the fraction of validation in-distribution inputs a threshold accepts


@dataclass
class Detections:
    """``detect``'s verdicts for a batch of B inputs (tensors on the model's device)."""

    labels: Tensor  # (B,) the predicted class
    confidence: Tensor  # (B,) its calibrated probability, max softmax(logits / T)
    score: Tensor  # (B,) the detector's in-distribution score (higher: more in-distribution)
    is_in: Tensor  # (B,) bool: score >= threshold
    threshold: float  # the score accepting 95 % of the validation in-distribution inputs
    detector: str

    def __len__(self) -> int:
        return len(self.labels)


class OODAPI:
    """Needs ``classifier``, ``input_shape``, ``temperature`` and the threshold buffers (evaluation.py)."""

    def add_threshold_buffers(self) -> None:
        """The buffers of ODIN's, energy's and Mahalanobis' thresholds and Mahalanobis' Gaussians, nan until
        fitted; a state dict without them (a checkpoint saved before they existed) loads with them left nan
        (``threshold`` and ``mahalanobis_gaussians`` fit them then)."""
        for name in LATE_THRESHOLDS:
            self.register_buffer(name, torch.tensor(float("nan")))  # cpu: moves with the module
        k, f = self.classifier.head.out_features, self.classifier.head.in_features
        self.register_buffer("mahalanobis_means", torch.full((k, f), float("nan")))  # cpu: moves with the module
        self.register_buffer("mahalanobis_precision", torch.full((f, f), float("nan")))  # cpu: likewise

        def fill_missing(module, state_dict, prefix, *args) -> None:
            for name in (*LATE_THRESHOLDS, *GAUSSIANS):  # cpu: copied into the buffer
                state_dict.setdefault(prefix + name, torch.full_like(getattr(module, name), float("nan")))

        self.register_load_state_dict_pre_hook(fill_missing)

    # ---- inputs -----------------------------------------------------------------------------------
    def transforms(self) -> ImageTransforms:
        """The input transforms of the card (``zoo.transforms(name)``), or derived from the model's data for a
        checkpoint or an older card: digits grey, box filter, light ink on dark (invert auto); colour
        datasets RGB, bilinear, never inverted."""
        found = card_transforms(self)
        if found is not None:
            return found
        if len(self.input_shape) != 3:
            raise UserError(f"this model takes points (B, {self.input_shape[0]}), not pictures: it has no image "
                            "transforms")
        c, h, w = self.input_shape
        digits = self.data_info.get("dataset") == "digits"
        return ImageTransforms(size=(h, w), channels=c, resample="box" if digits else "bilinear",
                               polarity="light_on_dark" if digits else "none", invert="auto" if digits else "false",
                               data=DIGITS_DATA if digits else "")

    def preprocess(self, images: Any, invert: Any = None, strict: bool = False, resize: bool | None = None,
                   convert: bool | None = None) -> Tensor:
        """Inputs as the model takes them: (B, *input_shape) on the model's device.

        ``images``: a tensor batch (B, C, H, W) in [0, 1] of the model's shape (checked, moved), or one or a
        list of file paths, PIL images, numpy arrays or tensor images of any size, through ``transforms()``
        (grey or RGB, resized with the card's filter, the data's polarity: ``invert`` auto / true / false,
        None: the card's default). ``strict`` (or the older ``resize=False`` / ``convert=False``): refuse a
        picture of another size or channel count instead. A model of 2-D points takes a tensor (B, 2) only."""
        if len(self.input_shape) != 3:
            if not isinstance(images, Tensor):
                raise UserError(f"this model takes points: give a tensor of shape (B, {self.input_shape[0]}), "
                                f"got {type(images).__name__}")
            return image_batch(images, None, self.input_shape, self.device, self.dtype)
        strict = strict or resize is False or convert is False
        return transform_batch(self.transforms(), images, tuple(self.input_shape), self.device, self.dtype,
                               invert, strict)

    # ---- predictions ------------------------------------------------------------------------------
    @torch.no_grad()
    def predict_proba(self, x: Any, calibrated: bool = True) -> Tensor:
        """Class probabilities (B, K): softmax(logits / T) with the temperature fitted on validation data
        (``calibrated``), or the plain softmax."""
        logits = self.classifier(self.preprocess(x))
        return (logits / self.temperature if calibrated else logits).softmax(-1)

    def detect(self, x: Any, detector: str = "msp") -> Detections:
        """Class, calibrated confidence, the detector's score and the in/out verdict of each input, at the
        threshold that accepts 95 % of the validation in-distribution inputs. ``detector``: msp (maximum
        softmax), odin (temperature and input perturbation chosen on validation data), energy, or
        mahalanobis (the distance of the features to the nearest class mean, Gaussians fitted on the
        training split)."""
        if detector not in API_DETECTORS:
            raise UserError(f"detector must be one of {', '.join(API_DETECTORS)}, got {detector!r}")
        x = self.preprocess(x)
        with torch.no_grad():
            logits = self.classifier(x)
            probs = (logits / self.temperature).softmax(-1)
        score = self.detector_score(x, detector, logits)
        threshold = self.threshold(detector)
        confidence, labels = probs.max(-1)
        return Detections(labels, confidence, score, score >= threshold, threshold, detector)

    def detector_score(self, x: Tensor, detector: str, logits: Tensor | None = None) -> Tensor:
        """In-distribution scores (B,) of a preprocessed batch, as ``zoo.evaluate`` computes them."""
        if detector == "odin":  # needs the input gradient: pytorch-ood leaves no_grad / inference mode for it
            with torch.enable_grad():
                return det.odin_score(self.classifier, x, float(self.odin_temperature), float(self.odin_eps))
        if detector == "mahalanobis":
            means, precision = self.mahalanobis_gaussians()
            with torch.no_grad():
                return det.MahalanobisScorer.from_gaussians(means, precision)(self.classifier.embed(x))
        with torch.no_grad():
            logits = self.classifier(x) if logits is None else logits
            return det.msp_score(logits) if detector == "msp" else det.energy_score(logits)

    def threshold(self, detector: str = "msp") -> float:
        """The detector's score accepting 95 % of the validation in-distribution inputs (a buffer; fitted
        here once on the model's validation data where the checkpoint predates it)."""
        buffer = getattr(self, f"{detector}_threshold")
        if torch.isnan(buffer):
            x = self.validation_inputs()
            scores = torch.cat([self.detector_score(x[i:i + 512], detector) for i in range(0, len(x), 512)])
            buffer.fill_(float(torch.quantile(scores.float(), 1 - TPR)))
            print(f"note: the model stores no {detector} threshold (saved before it existed); computed it on the "
                  f"validation split of its data ({len(x)} inputs): {float(buffer):.4g}", file=sys.stderr)
        return float(buffer)

    def mahalanobis_gaussians(self) -> tuple[Tensor, Tensor]:
        """The class means (K, F) and shared precision (F, F) of the training features (buffers; fitted here
        once on the model's training split where the checkpoint predates them)."""
        if torch.isnan(self.mahalanobis_means).any():
            x, y = self.model_data("train")
            self.fit_mahalanobis(x, y)
            print(f"note: the model stores no Mahalanobis Gaussians (saved before they existed); fitted them on "
                  f"the training split of its data ({len(x)} inputs)", file=sys.stderr)
        return self.mahalanobis_means, self.mahalanobis_precision

    @torch.no_grad()
    def fit_mahalanobis(self, x: Tensor, y: Tensor) -> None:
        """Fit the Gaussians on training inputs x (N, *input_shape) with labels y (N,)."""
        feats = torch.cat([self.classifier.embed(x[i:i + 512]) for i in range(0, len(x), 512)])  # (N, F)
        scorer = det.MahalanobisScorer(feats, y.to(feats.device))
        self.mahalanobis_means.copy_(scorer.means)
        self.mahalanobis_precision.copy_(scorer.precision)

    def validation_inputs(self) -> Tensor:
        """The validation in-distribution inputs of the data the model was trained on (B, *input_shape)."""
        return self.model_data("val")[0]

    def model_data(self, split: str) -> tuple[Tensor, Tensor]:
        """A split's in-distribution inputs (B, *input_shape) and labels (B,) of the data the model was
        trained on, rebuilt from the data options stored with it."""
        data = dict((getattr(self, "run_info", None) or {}).get("data") or {})
        if "name" not in data:
            raise UserError("this model has no stored threshold for the detector and no data options to fit one "
                            "(load it with zoo.load, or validate it with zoo.train / a Trainer first)")
        info = self.run_info
        with loaded_config(info.get("loaded_from", ""), trust_code=info.get("trust_code", True)):  # as zoo.load did
            entry = DATAMODULES.entry(data.pop("name"))
        dm = entry.obj(validate(entry.config, data, "the model's data options") if entry.config else data)
        dm.prepare_data()
        dm.setup("fit" if split == "train" else "validate")
        x, y = dm.parts[split]
        return as_float(x).to(self.device, self.dtype), y.to(self.device)


@dataclass
class PredictOptions:
    """``python -m zoo.predict ood-digits-joint IMAGE ... key=value``."""

    strict: bool = False  # refuse images of another size or channel count (default: converted as the card says)
    resize: bool = True  # false: refuse images of another size (as strict)
    convert: bool = True  # false: refuse images of another channel count (as strict)
    invert: str = "auto"  # dark ink on light paper: auto (from the border pixels), true, false


def predict_cli(model: Any, inputs: list[str], options: dict) -> None:
    """Image files -> class, calibrated confidence and in/out verdict by max-softmax (``detect``). Options:
    strict (refuse other sizes / channels), invert (auto, true, false: dark ink on light paper)."""
    o = validate(PredictOptions, options, "ood predict", what="option")
    if len(model.input_shape) != 3:
        raise UserError("zoo.predict for the OOD model reads image files; this model takes 2-D points")
    if not inputs:
        raise UserError("give one or more image files: python -m zoo.predict MODEL a.png b.png")
    x = model.preprocess(inputs, invert=str(o["invert"]), strict=o["strict"], resize=o["resize"], convert=o["convert"])
    d = model.detect(x, "msp")
    for path, label, conf, m, inside in zip(inputs, d.labels.tolist(), d.confidence.tolist(), d.score.tolist(),
                                            d.is_in.tolist()):
        if inside:
            print(f"{path}: class {label} (calibrated confidence {conf:.3f}), "
                  f"max-softmax {m:.3f} -> in-distribution (threshold {d.threshold:.3f})")
        else:  # a class and a calibrated confidence would read as an answer (temperature < 1 sharpens them)
            print(f"{path}: no class (the closest is {label}; confidence means nothing out here), "
                  f"max-softmax {m:.3f} -> OUT-OF-DISTRIBUTION (threshold {d.threshold:.3f})")

