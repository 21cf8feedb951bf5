"""The OOD classifier's inference API (ood/predict.py) on the released models: ``detect`` scores give the
card's (= zoo.evaluate's) detection metrics, its threshold accepts 95 % of the validation data, thresholds
missing from older checkpoints are fitted lazily, and bad input is one clear error."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

import zoo
from tests.api_testlib import model_datamodule
from zoo.errors import UserError
from zoo.models.ood.data import as_float
from zoo.models.ood.detect import detection_metrics
from zoo.models.ood.predict import GAUSSIANS, LATE_THRESHOLDS
from zoo.predict import main as predict


@pytest.fixture(scope="module")
def joint():
    return zoo.load("ood-digits-joint")


def older_ce():
    """ood-digits-ce as a checkpoint saved before the late thresholds and the Gaussians existed: its state dict
    without them (they load nan, as from such a checkpoint)."""
    model = zoo.load("ood-digits-ce")
    late = (*LATE_THRESHOLDS, *GAUSSIANS)
    assert all(torch.isfinite(getattr(model, name)).all() for name in late)  # the release carries them all
    model.load_state_dict({k: v for k, v in model.state_dict().items() if k not in late})
    return model


@pytest.fixture(scope="module")
def parts(joint):
    return model_datamodule(joint).parts


@pytest.mark.parametrize("detector", ["msp", "energy", "odin", "mahalanobis"])
def test_detect_scores_give_the_cards_test_metrics(joint, parts, detector):
    """The card's metrics are zoo.evaluate's (tests/ood/test_ood_pretrained.py checks that to 1e-4)."""
    card = joint.run_info["card"]["metrics"]
    inside = joint.detect(as_float(parts["test"][0]), detector)
    for name, x_out in parts["test_ood"].items():
        outside = joint.detect(as_float(x_out), detector)
        for metric, value in detection_metrics(inside.score, outside.score).items():
            assert abs(value - card[f"test/{name}/{detector}/{metric}"]) < 1e-4, (name, metric)


def test_predict_proba_gives_the_cards_accuracy_and_calibrated_nll(joint, parts):
    x, y = as_float(parts["test"][0]), parts["test"][1]
    card = joint.run_info["card"]["metrics"]
    p, raw = joint.predict_proba(x), joint.predict_proba(x, calibrated=False)
    assert p.shape == (len(x), 10) and torch.allclose(p.sum(-1), torch.ones(len(x)))
    assert abs((p.argmax(-1) == y).float().mean().item() - card["test/acc"]) < 1e-6
    assert abs(F.nll_loss(p.log(), y).item() - card["test/nll_ts"]) < 1e-4
    assert abs(F.nll_loss(raw.log(), y).item() - card["test/nll"]) < 1e-4
    d = joint.detect(x)
    assert torch.equal(d.labels, p.argmax(-1)) and torch.allclose(d.confidence, p.max(-1).values)


@pytest.mark.parametrize("detector", ["msp", "energy", "odin", "mahalanobis"])
def test_threshold_accepts_95_percent_of_the_validation_data(joint, parts, detector):
    """msp's threshold is the stored buffer (fitted in validation); mahalanobis' is fitted lazily here (the
    released checkpoint predates it, and its Gaussians) the same way: the 5 % quantile of the validation
    scores."""
    x_val = as_float(parts["val"][0])
    d = joint.detect(x_val, detector)
    accepted, n = int(d.is_in.sum()), len(x_val)  # 180 validation digits: 171 is 95 %
    assert round(0.95 * n) <= accepted <= round(0.95 * n) + 2, accepted
    assert d.threshold == joint.threshold(detector) and torch.isfinite(getattr(joint, f"{detector}_threshold"))
    assert torch.equal(d.is_in, d.score >= d.threshold)


def test_thresholds_travel_in_the_state_dict_and_old_ones_load(joint):
    older = older_ce()  # a checkpoint from before the buffers existed: fitted on first use
    assert torch.isnan(older.odin_threshold) and torch.isnan(older.energy_threshold)
    fresh = zoo.load("ood-digits-joint")  # re-released with them
    assert torch.isfinite(fresh.odin_threshold) and torch.isfinite(fresh.energy_threshold)
    state = {k: v.clone() for k, v in fresh.state_dict().items()}  # copies: loading fills the buffers in place
    old = {k: v for k, v in state.items() if k not in ("odin_threshold", "energy_threshold")}
    fresh.load_state_dict(old)  # strict, still: a checkpoint from before the buffers existed
    assert torch.isnan(fresh.energy_threshold)
    fresh.load_state_dict(state)  # strict: the buffers are in it
    assert fresh.energy_threshold == state["energy_threshold"]


def test_training_stores_every_detectors_threshold(tmp_path, capsys):
    """Validation fits msp's, energy's and (with the ODIN search) odin's thresholds: a trained checkpoint needs
    no lazy fit, and each accepts 95 % of the validation digits (the same quantile as the lazy fit)."""
    from zoo.train import train

    run = train(["recipe=ood_digits_ce", f"run_dir={tmp_path}", "trainer.max_epochs=1",
                 "trainer.enable_progress_bar=false", "model.mahalanobis=false", "model.odin_temperatures=[1000]",
                 "model.odin_eps=[0.001]", "test_after_fit=false"])
    model = zoo.load(str(next(tmp_path.glob("ood_digits_ce/*/checkpoints/last.ckpt"))))
    assert all(torch.isfinite(getattr(model, f"{d}_threshold")) for d in ("msp", "energy", "odin"))
    assert model.odin_threshold == run.model.odin_threshold
    x_val = as_float(model_datamodule(model).parts["val"][0])
    capsys.readouterr()
    for detector in ("msp", "energy", "odin"):
        assert 171 <= int(model.detect(x_val, detector).is_in.sum()) <= 173, detector  # 95 % of 180
    assert "computed it on the validation split" not in capsys.readouterr().err  # stored, not fitted here


def test_mahalanobis_gaussians_travel_in_the_state_dict_and_old_ones_load(joint):
    """A checkpoint from before the Gaussians: they load nan, the first detect fits them on the training split
    (features of the training digits: each class mean is the mean of its class's features), and a state dict
    with them restores them as they were."""
    older = older_ce()
    assert torch.isnan(older.mahalanobis_means).all() and torch.isnan(older.mahalanobis_precision).all()
    x = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    d = older.detect(x, "mahalanobis")
    means = older.mahalanobis_means.clone()
    x_train, y_train = model_datamodule(older, "fit").parts["train"]
    with torch.no_grad():
        feats = older.classifier.embed(as_float(x_train))
    assert torch.allclose(means[3], feats[y_train == 3].mean(0), atol=1e-5)
    fresh = zoo.load("ood-digits-ce")
    fresh.load_state_dict(older.state_dict())
    assert torch.equal(fresh.mahalanobis_means, means)
    assert torch.allclose(fresh.detect(x, "mahalanobis").score, d.score)
    assert d.threshold == fresh.threshold("mahalanobis")


def test_training_fits_the_mahalanobis_gaussians_and_threshold(tmp_path):
    """With the ODIN search, validation fits Mahalanobis' Gaussians and threshold: the checkpoint needs no lazy
    fit, and its threshold accepts 95 % of the validation digits."""
    from zoo.train import train

    train(["recipe=ood_digits_ce", f"run_dir={tmp_path}", "trainer.max_epochs=1", "trainer.enable_progress_bar=false",
           "model.odin_temperatures=[1000]", "model.odin_eps=[0]", "test_after_fit=false"])
    model = zoo.load(str(next(tmp_path.glob("ood_digits_ce/*/checkpoints/last.ckpt"))))
    assert torch.isfinite(model.mahalanobis_means).all() and torch.isfinite(model.mahalanobis_threshold)
    x_val = as_float(model_datamodule(model).parts["val"][0])
    assert 171 <= int(model.detect(x_val, "mahalanobis").is_in.sum()) <= 173  # 95 % of 180


def test_detect_without_a_threshold_or_data_is_a_clear_error(joint):
    model = type(joint)(**joint.hparams)  # built by hand: no stored thresholds, no data options
    with pytest.raises(UserError, match="no stored threshold for the detector and no data options"):
        model.detect(torch.rand(2, 1, 8, 8), "energy")


def test_detect_is_what_predict_prints(joint, parts, tmp_path, capsys):
    x = as_float(parts["test"][0][:2])
    paths = []
    for i, image in enumerate(x):
        paths.append(tmp_path / f"d{i}.png")
        Image.fromarray((image[0].numpy() * 255).round().astype(np.uint8)).save(paths[-1])
    assert predict(["ood-digits-joint", *map(str, paths)]) == 0
    lines = capsys.readouterr().out.splitlines()
    d = joint.detect([str(p) for p in paths])
    for line, label, m, inside in zip(lines, d.labels.tolist(), d.score.tolist(), d.is_in.tolist()):
        assert f"max-softmax {m:.3f}" in line and (f"class {label} " in line if inside else "OUT-OF" in line), line


def test_inputs_as_files_pil_numpy_and_tensors(joint, tmp_path):
    image = Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8) * 4)
    path = tmp_path / "a.png"
    image.save(path)
    x = joint.preprocess(str(path))
    assert x.shape == (1, 1, 8, 8) and torch.equal(x, joint.preprocess(image))
    assert torch.equal(x, joint.preprocess(np.asarray(image))) and torch.equal(x, joint.preprocess(x))
    big = image.resize((16, 16)).convert("RGB")
    assert joint.preprocess(big, resize=True, convert=True).shape == (1, 1, 8, 8)
    assert len(joint.detect([image, image])) == 2


@pytest.mark.parametrize("call, expected", [
    (lambda m: m.detect(torch.zeros(2, 3, 8, 8)), r"\(wrong channels\)"),
    (lambda m: m.preprocess(np.zeros((16, 16), np.uint8), strict=True), "16x16 pixels; the model takes 8x8"),
    (lambda m: m.preprocess(np.zeros((8, 8, 3), np.uint8), resize=False), r"3 channel\(s\) \(RGB\); the model takes 1"),
    (lambda m: m.detect(np.full((8, 8), 300.0)), r"values in \[0, 1\] \(or be uint8 0..255\), got 300..300: divide"),
    (lambda m: m.preprocess(np.zeros((8, 8)), invert="maybe"), "invert must be auto, true or false"),
    (lambda m: m.detect(torch.zeros(2, 1, 8, 8), detector="knn"), "detector must be one of msp, odin, energy, maha"),
    (lambda m: m.predict_proba(torch.zeros(1, 8, 8)), "add the batch dimension"),
])
def test_bad_input_is_one_clear_error(joint, call, expected):
    with pytest.raises(UserError, match=expected):
        call(joint)
