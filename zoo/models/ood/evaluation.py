"""Validation and test for the OOD classifier (a mixin of ``OODClassifier``).

Validation (every epoch): the in-distribution loss and accuracy; temperature scaling is refitted
on the validation logits (buffer ``temperature``); the threshold that accepts 95 % of validation
images by max-softmax (buffer ``msp_threshold``; ``energy_threshold`` likewise, and ``odin_threshold`` with
the ODIN search: ``detect`` in predict.py uses them); mean max-softmax
AUROC / TNR@TPR95 over the validation OOD sets. Every ``odin_every_n_epochs`` and at the last
epoch, the ODIN search: every (T, eps) of ``odin_temperatures`` x ``odin_eps`` on the validation
in-distribution and OOD sets; the pair with the best mean TNR@TPR95 (then AUROC) is kept in the
buffers ``odin_temperature`` / ``odin_eps``. The buffers travel in checkpoints and pretrained files,
so ``zoo.evaluate`` reproduces the test numbers without redoing any of this.

Test: ``test/acc``, ``test/nll``, ``test/ece`` and, after temperature scaling, ``test/nll_ts``,
``test/ece_ts`` (``test/temperature``); for every OOD set S and detector D,
``test/S/D/{tnr95,auroc,aupr_in,aupr_out,det_acc}``; figures: ROC curves, max-softmax histograms,
a reliability diagram (and the 2-D confidence map / the generator's samples when they apply).
"""

from __future__ import annotations

from collections import defaultdict

import torch
import torch.nn.functional as F
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor

from zoo.models.ood import detect, plots
from zoo.models.ood.plots import upscale


class OODEvaluation:
    """Needs ``self.classifier`` (with ``embed`` and ``head``), ``self.cfg`` and ``self.data_info``."""

    fitted_buffers = ("temperature", "msp_threshold", "odin_temperature", "odin_eps", "odin_threshold",
                      "energy_threshold", "mahalanobis_threshold", "mahalanobis_means",
                      "mahalanobis_precision")  # set on validation
    temperature_unfit_said = False  # the note that validation gives the temperature no optimum, once a run

    def init_evaluation(self) -> None:
        # cpu: buffers, made while the module is built; they move with it (.to / Lightning)
        self.register_buffer("temperature", torch.ones(()))  # cpu: temperature scaling, fitted on validation
        self.register_buffer("msp_threshold", torch.tensor(0.5))  # cpu: max-softmax accepting 95 % of validation
        self.register_buffer("odin_temperature", torch.tensor(1000.0))  # cpu: ODIN's T, chosen on validation
        self.register_buffer("odin_eps", torch.tensor(0.0014))  # cpu: ODIN's eps (pixels), chosen on validation
        self.add_threshold_buffers()  # odin_threshold, energy_threshold (predict.py)
        self._records: dict = defaultdict(lambda: defaultdict(list))
        self._odin_now = False

    # ---- collection ------------------------------------------------------------------------------
    def _gather(self, t: Tensor) -> Tensor:
        world, _ = self.world()
        return self.all_gather(t).flatten(0, 1) if world > 1 else t

    def _collected(self) -> list[dict[str, Tensor]]:
        # float32 for the metrics and figures, whatever the precision the batches ran in (bf16-mixed)
        out = [{k: self._gather(torch.cat(v)).float() if k != "labels" else self._gather(torch.cat(v))
                for k, v in self._records[i].items()} for i in sorted(self._records)]
        self._records = defaultdict(lambda: defaultdict(list))
        return out

    def _last_epoch(self) -> bool:
        return self.trainer.max_epochs is not None and self.current_epoch + 1 >= self.trainer.max_epochs

    def _record(self, x: Tensor, y: Tensor, idx: int, split: str) -> Tensor:
        rec = self._records[idx]
        feats = self.classifier.embed(x)  # (B, F)
        logits = self.classifier.head(feats)  # (B, K)
        rec["logits"].append(logits)
        rec["labels"].append(y)
        if split == "test" or (self._odin_now and self.cfg.mahalanobis):
            rec["features"].append(feats)
        if split == "test":
            T, eps = float(self.odin_temperature), float(self.odin_eps)
            rec["odin"].append(detect.odin_score(self.classifier, x, T, eps))
        elif self._odin_now:
            for T in self.cfg.odin_temperatures:
                for eps in self.cfg.odin_eps:
                    rec[f"odin_{T}_{eps}"].append(detect.odin_score(self.classifier, x, T, eps))
        return logits

    # ---- validation ------------------------------------------------------------------------------
    def on_validation_epoch_start(self) -> None:
        self._records = defaultdict(lambda: defaultdict(list))
        every = max(1, self.cfg.odin_every_n_epochs)
        self._odin_now = not self.trainer.sanity_checking and (
            (self.current_epoch + 1) % every == 0 or self._last_epoch())

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        x, y = batch
        logits = self._record(x, y, dataloader_idx, "val")
        if dataloader_idx == 0:
            self.log_dict({"val/loss": F.cross_entropy(logits, y), "val/acc": (logits.argmax(-1) == y).float().mean()},
                          batch_size=len(x), sync_dist=True, add_dataloader_idx=False, prog_bar=True)

    def on_validation_epoch_end(self) -> None:
        data = self._collected()
        if self.trainer.sanity_checking or not data:
            return
        logits, labels = data[0]["logits"], data[0]["labels"]
        self.temperature.fill_(detect.fit_temperature(logits, labels))
        T, all_right = float(self.temperature), bool((logits.argmax(-1) == labels).all())
        if (all_right or T <= detect.T_MIN * 1.0001) and not self.temperature_unfit_said:
            self.temperature_unfit_said = True  # once a run
            why = ("the classifier gets every validation example right, so a sharper softmax always lowers their "
                   "NLL" if all_right else f"the validation NLL still fell at the fit's floor {detect.T_MIN}")
            rank_zero_info(f"note: the fitted temperature ({T:.3g}) is no optimum: {why}; temperature scaling "
                           "means little on such data (test/temperature, test/nll_ts, test/ece_ts)")
        msp_in = detect.msp_score(logits)
        self.msp_threshold.fill_(float(torch.quantile(msp_in.float(), 0.05)))
        self.energy_threshold.fill_(float(torch.quantile(detect.energy_score(logits).float(), 0.05)))
        per_set = [detect.detection_metrics(msp_in, detect.msp_score(d["logits"])) for d in data[1:]]
        each = {f"val/{name}/msp_tnr95": m["tnr95"] for name, m in zip(self.data_info["ood_sets"], per_set)}
        self.log_dict({"val/msp_auroc": _mean(per_set, "auroc"), "val/msp_tnr95": _mean(per_set, "tnr95"),
                       "val/ece": detect.calibration(logits, labels)["ece"],
                       "val/temperature": float(self.temperature), **each}, add_dataloader_idx=False, sync_dist=True)
        if self._odin_now:
            self._choose_odin(data)
            if self.cfg.mahalanobis:
                self._fit_mahalanobis(data[0]["features"])
        if hasattr(self, "generator"):
            self.diagnose(msp_in)  # the GAN's curves (diagnostics.py)
        if (self.current_epoch + 1) % max(1, self.cfg.plot_every_n_epochs) == 0 or self._last_epoch():
            self.save_pictures()

    def _choose_odin(self, data: list[dict[str, Tensor]]) -> None:
        best = None
        for T in self.cfg.odin_temperatures:
            for eps in self.cfg.odin_eps:
                key = f"odin_{T}_{eps}"
                m = [detect.detection_metrics(data[0][key], d[key]) for d in data[1:]]
                score = (_mean(m, "tnr95"), _mean(m, "auroc"))
                if best is None or score > best[0]:
                    best = (score, T, eps)
        (tnr, auroc), T, eps = best
        self.odin_temperature.fill_(T)
        self.odin_eps.fill_(eps)
        self.odin_threshold.fill_(float(torch.quantile(data[0][f"odin_{T}_{eps}"].float(), 0.05)))
        self.log_dict({"val/odin_tnr95": tnr, "val/odin_auroc": auroc, "val/odin_temperature": T,
                       "val/odin_eps": eps}, add_dataloader_idx=False, sync_dist=True)

    def _fit_mahalanobis(self, val_features: Tensor) -> None:
        """Mahalanobis' Gaussians on the training split and its threshold on the validation features (B, F)."""
        train = self._train_features()
        if train is None:
            return
        scorer = detect.MahalanobisScorer(*train)
        self.mahalanobis_means.copy_(scorer.means)
        self.mahalanobis_precision.copy_(scorer.precision)
        self.mahalanobis_threshold.fill_(float(torch.quantile(scorer(val_features), 0.05)))

    # ---- test ------------------------------------------------------------------------------------
    def on_test_epoch_start(self) -> None:
        self._records = defaultdict(lambda: defaultdict(list))

    def test_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        x, y = batch
        self._record(x, y, dataloader_idx, "test")

    def _train_features(self) -> tuple[Tensor, Tensor] | None:
        dm = getattr(self.trainer, "datamodule", None)
        train = getattr(dm, "train_set", None)
        if train is None:
            return None
        feats, labels = [], []
        with torch.no_grad():
            for x, y in torch.utils.data.DataLoader(train, batch_size=512):
                feats.append(self.classifier.embed(x.to(self.device, self.dtype)))
                labels.append(y.to(self.device))
        return torch.cat(feats), torch.cat(labels)

    def on_test_epoch_end(self) -> None:
        data = self._collected()
        if not data:
            return
        logits, labels = data[0]["logits"], data[0]["labels"]
        T = float(self.temperature)
        before, after = detect.calibration(logits, labels), detect.calibration(logits, labels, T)
        metrics = {"test/acc": before["acc"], "test/nll": before["nll"], "test/ece": before["ece"],
                   "test/nll_ts": after["nll"], "test/ece_ts": after["ece"], "test/temperature": T}
        scores = [{"msp": detect.msp_score(d["logits"]), "odin": d["odin"], "energy": detect.energy_score(d["logits"])}
                  for d in data]
        train = self._train_features() if self.cfg.mahalanobis else None
        if train is not None:
            scorer = detect.MahalanobisScorer(*train)
            for s, d in zip(scores, data):
                s["mahalanobis"] = scorer(d["features"])
        names = self.data_info["ood_sets"]
        for name, s_out in zip(names, scores[1:]):
            for det, score in s_out.items():
                for m, v in detect.detection_metrics(scores[0][det], score).items():
                    metrics[f"test/{name}/{det}/{m}"] = v
        self.log_dict(metrics, add_dataloader_idx=False, sync_dist=True)  # equal on every rank (gathered)
        self.test_metrics = metrics
        fig = plots.roc_curves(scores[0], dict(zip(names, scores[1:])))
        self.save_figure("roc", fig)
        msp_out = {n: s["msp"] for n, s in zip(names, scores[1:])}
        self.save_figure("msp_hist", plots.score_histograms(scores[0]["msp"], msp_out))
        self.save_figure("reliability", plots.reliability(logits, labels, T))
        self.save_pictures()

    # ---- pictures --------------------------------------------------------------------------------
    @torch.no_grad()
    def save_pictures(self) -> None:
        was_training = self.training
        self.eval()
        points_2d = len(self.input_shape) == 1 and self.input_shape[0] == 2
        fake = self.generate(256 if points_2d else 64) if hasattr(self, "generator") else None
        if points_2d:
            dm = self.attached_datamodule()
            train = getattr(dm, "train_set", None)
            points = (train.x, train.y) if train is not None else None
            self.save_figure("confidence_map", plots.confidence_map(self.classifier, points, fake, self.cfg.mode))
        elif fake is not None:
            self.save_image("generated", upscale(fake.cpu()), nrow=8, padding=1, pad_value=0.5)
        if fake is not None:
            self.save_diagnostics()
        self.train(was_training)


def _mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / max(1, len(rows))

