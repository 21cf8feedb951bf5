"""zoo.predict with the OOD model, and its user errors (exit 2)."""

import numpy as np
import pytest
from PIL import Image

from zoo import predict
from zoo.train import main


@pytest.fixture
def checkpoint():
    return "ood-digits-ce"  # the released weights: predict needs no training here


def test_predict_prints_class_confidence_and_verdict(tmp_path, capsys):
    from sklearn.datasets import load_digits

    digit = (load_digits().images[0] / 16 * 255).astype(np.uint8)  # a real 8x8 zero
    Image.fromarray(digit).save(tmp_path / "zero.png")
    Image.fromarray(np.full((8, 8), 128, np.uint8)).save(tmp_path / "grey.png")
    assert predict.main(["ood-digits-joint", str(tmp_path / "zero.png"), str(tmp_path / "grey.png")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    for line, name in zip(out, ("zero.png", "grey.png")):  # one line per file: class, confidence, verdict
        assert name in line and "max-softmax" in line and "threshold" in line
        assert ("-> in-distribution" in line) != ("-> OUT-OF-DISTRIBUTION" in line), line
    # the joint model accepts a real digit as the right class and rejects a flat grey square
    # (max-softmax 0.31 against its threshold 0.54; the ce model accepts the square at 0.98)
    assert "class 0 (calibrated confidence" in out[0] and "-> in-distribution" in out[0]
    assert "-> OUT-OF-DISTRIBUTION" in out[1] and "no class" in out[1] and "calibrated" not in out[1]


def test_predict_converts_sizes_and_channels_unless_strict(checkpoint, tmp_path, capsys):
    Image.fromarray(np.zeros((28, 28), np.uint8)).save(tmp_path / "big.png")
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "rgb.png")
    assert predict.main([str(checkpoint), str(tmp_path / "big.png"), "strict=true"]) == 2
    assert "28x28" in capsys.readouterr().err
    assert predict.main([str(checkpoint), str(tmp_path / "rgb.png"), "convert=false"]) == 2
    assert "3 channel" in capsys.readouterr().err
    assert predict.main([str(checkpoint), str(tmp_path / "big.png")]) == 0  # resized as the card says
    capsys.readouterr()
    assert predict.main([str(checkpoint), str(tmp_path / "big.png"), "resize=true"]) == 0
    capsys.readouterr()
    assert predict.main([str(checkpoint), str(tmp_path / "big.png"), "resize=maybe"]) == 2
    assert "'resize'" in capsys.readouterr().err


@pytest.mark.parametrize("override, expected", [
    ("model.beta=-0.5", "'beta' in recipe"),
    ("model.mode=gan", "must be one of"),
    ("data.ood_train=false", "needs an explicit OOD training set"),
])
def test_bad_options_exit_2(tmp_path, capsys, override, expected):
    code = main(["recipe=ood_digits_confidence", f"run_dir={tmp_path}", override])
    assert code == 2 and expected in capsys.readouterr().err
    assert not any(tmp_path.rglob("*.ckpt"))


def test_empty_ood_folder_exits_2(tmp_path, capsys):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from tiny_ood_files import write_svhn

    write_svhn(tmp_path / "data")
    (tmp_path / "data" / "LSUN_resize").mkdir()
    code = main(["recipe=ood_svhn_ce", f"run_dir={tmp_path}/runs", f"data.root={tmp_path / 'data'}",
                 "data.ood=[folder:LSUN_resize]", "data.val_size=10"])
    assert code == 2 and "holds no images" in capsys.readouterr().err


def test_negative_beta_in_joint_mode_exits_2(tmp_path, capsys):
    assert main(["recipe=ood_digits_joint", f"run_dir={tmp_path}", "model.beta=-1"]) == 2
    err = capsys.readouterr().err
    assert "'beta'" in err and "must be >= 0" in err and "Traceback" not in err


def test_data_of_another_shape_is_a_clear_error(tmp_path):
    """A model meeting data of another shape (zoo.evaluate CKPT data.dataset=..., or a resume with
    other data) stops with one message before any batch, not inside a convolution."""
    import sys
    from pathlib import Path

    import lightning as L

    from zoo.errors import UserError
    from zoo.models.ood.data import OODDigits, OODImages
    from zoo.models.ood.module import OODClassifier

    sys.path.insert(0, str(Path(__file__).parent))
    from tiny_ood_files import write_mnist, write_svhn

    model = OODClassifier({"mode": "ce"}, OODDigits({}).info())  # takes (1, 8, 8)
    write_mnist(tmp_path)
    write_svhn(tmp_path)
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    cases = (("mnist", r"\[1, 28, 28\].*wrong size"), ("svhn", r"\[3, 32, 32\].*wrong channels and size"))
    for dataset, wrong in cases:
        data = OODImages({"root": str(tmp_path), "dataset": dataset, "val_size": 10, "ood_val_size": 3,
                          "noise_size": 5})
        with pytest.raises(UserError, match=rf"the data \({dataset}\) gives inputs of shape {wrong}"):
            trainer.test(model, datamodule=data)
    # resuming: the checkpoint's data is compared before its weights are loaded
    ckpt = {"hyper_parameters": {"data_info": {"input_shape": [3, 8, 8], "num_classes": 10}}}
    with pytest.raises(UserError, match=r"checkpoint was trained on inputs of shape \[3, 8, 8\].*wrong channels\)"):
        model.on_load_checkpoint(ckpt)
    ckpt["hyper_parameters"]["data_info"] = {"input_shape": [1, 8, 8], "num_classes": 2}
    with pytest.raises(UserError, match="the checkpoint has 2 classes; the model has 10"):
        model.on_load_checkpoint(ckpt)
    model.on_load_checkpoint({"hyper_parameters": {"data_info": {"input_shape": [1, 8, 8], "num_classes": 10}}})
