"""zoo.predict with the OOD model, and its user errors (exit 2)."""

import numpy as np
import pytest
from PIL import Image

from zoo import predict
from zoo.train import main


@pytest.fixture
def checkpoint():
    return "ood-digits-ce"  # the released weights: predict needs no training here


def test_predict_prints_class_confidence_and_verdict(checkpoint, tmp_path, capsys):
    from sklearn.datasets import load_digits

    digit = (load_digits().images[0] / 16 * 255).astype(np.uint8)  # a real 8x8 zero
    Image.fromarray(digit).save(tmp_path / "zero.png")
    Image.fromarray(np.full((8, 8), 128, np.uint8)).save(tmp_path / "grey.png")
    assert predict.main([str(checkpoint), str(tmp_path / "zero.png"), str(tmp_path / "grey.png")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "class" in out[0] and "threshold" in out[0]
    assert "distribution" in out[0].lower() and "OUT-OF-DISTRIBUTION" in out[1] or "in-distribution" in out[1]


def test_predict_refuses_wrong_size_and_channels(checkpoint, tmp_path, capsys):
    Image.fromarray(np.zeros((28, 28), np.uint8)).save(tmp_path / "big.png")
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "rgb.png")
    assert predict.main([str(checkpoint), str(tmp_path / "big.png")]) == 2
    assert "28x28" in capsys.readouterr().err
    assert predict.main([str(checkpoint), str(tmp_path / "rgb.png")]) == 2
    assert "3 channel" in capsys.readouterr().err
    assert predict.main([str(checkpoint), str(tmp_path / "big.png"), "resize=true"]) == 0


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
