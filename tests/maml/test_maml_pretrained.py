"""The released maml-sinusoid: its card is reproduced by zoo.evaluate, zoo.predict adapts to points."""

import json

from zoo.evaluate import evaluate
from zoo.loading import PRETRAINED_DIR
from zoo.predict import main as predict


def test_evaluate_reproduces_the_card():
    card = json.loads((PRETRAINED_DIR / "maml-sinusoid.json").read_text())
    got = evaluate("maml-sinusoid", {"trainer.accelerator": "cpu"})  # the card's device: exact up to summation order
    for key in ("test/loss_0", "test/loss_1", "test/loss_10"):
        assert abs(got[key] - card["metrics"][key]) < 1e-4, key
    assert card["metrics"]["test/loss_1"] < 0.5 < card["metrics"]["test/loss_0"]  # one step adapts


def test_predict_adapts_to_given_points_and_to_a_random_task(tmp_path, capsys):
    out = tmp_path / "fit.png"
    assert predict(["maml-sinusoid", "--", "-4,1.5", "-2,-2", "0,-1", "1,1.8", "3,0.5", "steps=5", f"out={out}"]) == 0
    text = capsys.readouterr().out
    assert out.stat().st_size > 10_000 and "x=+0.0" in text
    assert predict(["maml-sinusoid", "seed=4", f"out={tmp_path / 'rand.png'}"]) == 0
    assert (tmp_path / "rand.png").is_file()
    assert predict(["maml-sinusoid", "1,x", f"out={tmp_path / 'bad.png'}"]) == 2
    assert predict(["maml-sinusoid", "steps=-1", f"out={tmp_path / 'bad.png'}"]) == 2
    assert not (tmp_path / "bad.png").exists()


def test_predict_on_points_follows_a_float64_model(tmp_path, capsys):
    """The user's points and the printed grid follow the model's dtype (a float64 model meets float32 points)."""
    import zoo

    model = zoo.load("maml-sinusoid").double()
    model.predict_cli(["-4,1.5", "0,-1", "2,0.5"], {"out": str(tmp_path / "fit64.png"), "steps": 2})
    text = capsys.readouterr().out
    assert (tmp_path / "fit64.png").is_file() and "x=-5.0" in text and "x=+5.0" in text


def test_predict_refuses_points_it_cannot_fit(tmp_path, capsys):
    """Points of float32 overflow or far beyond the sinusoids are refused, not fitted to nan predictions."""
    for points, expected in ((["1,1e39"], "too large for the model's torch.float32"),
                             (["1e30,1", "2,1"], "fine-tuning on these points diverged")):
        out = tmp_path / "never.png"
        assert predict(["maml-sinusoid", "--", *points, f"out={out}"]) == 2
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err, err
        assert not out.exists()


def test_predict_option_set_to_null_names_its_default(capsys):
    assert predict(["maml-sinusoid", "out=null"]) == 2  # not "must be str, got None"
    err = capsys.readouterr().err
    assert "cannot be unset (null)" in err and "out=maml_adaptation.png" in err
