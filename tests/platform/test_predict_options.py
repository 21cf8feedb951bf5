"""Each model's ``zoo.predict`` options are declared as recipes' are (``positive``, ``at_least``, ``between``,
``choice`` as field defaults) and checked by ``zoo.schema.validate``; ``predict_cli`` checks by hand only
what depends on the model (captioning's beams against its vocabulary) or on the inputs. A bad value is one
``UserError`` naming the option and its range: exit status 2, one line, nothing written."""

import importlib

import pytest

from zoo import predict
from zoo.errors import UserError
from zoo.schema import validate

WHERE = {"vae": "VAE predict", "captioning": "the captioning model (sat)", "maml": "maml predict",
         "seqgan": "seqgan (zoo.predict)", "skipgram": "skipgram"}


@pytest.mark.parametrize("model, options, expected", [
    ("vae", {"n": 0}, "'n' in VAE predict must be >= 1, got 0"),
    ("vae", {"nrow": 0}, "'nrow' in VAE predict must be >= 1, got 0"),
    ("captioning", {"beam": 0}, "'beam' in the captioning model (sat) must be >= 1, got 0"),
    ("captioning", {"sbs": -1}, "'sbs' in the captioning model (sat) must be >= 0, got -1"),
    ("captioning", {"sbs": 1.5}, "'sbs' in the captioning model (sat) must be an integer, got 1.5"),
    ("captioning", {"max_len": 1001}, "'max_len' in the captioning model (sat) must be <= 1000 (words; 0 = the "
                                      "model's own), got 1001"),
    ("maml", {"steps": 10_001}, "'steps' in maml predict must be <= 10000 (gradient steps of fine-tuning; the paper "
                                "shows 1 and 10), got 10001"),
    ("maml", {"shots": -1}, "'shots' in maml predict must be >= 0, got -1"),
    ("seqgan", {"n": 0}, "'n' in seqgan (zoo.predict) must be >= 1, got 0"),
    ("seqgan", {"k": 101}, "'k' in seqgan (zoo.predict) must be <= 100 (a printed line each), got 101"),
    ("seqgan", {"method": "smaple"}, "'method' in seqgan (zoo.predict) must be one of ['sample', 'sbs'], got "
                                     "'smaple' (did you mean: sample?)"),
    ("skipgram", {"topn": 0}, "'topn' in skipgram must be >= 1, got 0"),
    ("skipgram", {"binary": "maybe"}, "bad value for 'binary' in skipgram: must be true or false, got 'maybe'"),
])
def test_predict_options_are_checked_by_their_declarations(model, options, expected):
    schema = importlib.import_module(f"zoo.models.{model}.predict").PredictOptions
    with pytest.raises(UserError) as err:
        validate(schema, options, WHERE[model], what="option")
    assert str(err.value) == expected
    defaults = validate(schema, {}, WHERE[model], what="option")  # every default passes its own range
    assert set(defaults) == {f for f in schema.__dataclass_fields__}


@pytest.mark.parametrize("argv, expected", [
    (["vae-digits", "nrow=0", "out=OUT/s.png"], "error: 'nrow' in VAE predict must be >= 1, got 0"),
    (["skipgram-synthetic", "w0", "topn=0"], "error: 'topn' in skipgram must be >= 1, got 0"),
    (["seqgan-oracle-small", "n=0"], "error: 'n' in seqgan (zoo.predict) must be >= 1, got 0"),
])
def test_a_bad_predict_option_is_one_line_and_exit_2(argv, expected, tmp_path, capsys):
    argv = [a.replace("OUT", str(tmp_path)) for a in argv]
    assert predict.main(argv) == 2
    out = capsys.readouterr()
    assert out.err.strip().splitlines() == [expected] and not out.out, out
    assert not any(tmp_path.iterdir())


def test_vae_invert_is_checked_once_by_preprocess_as_in_the_python_api(tmp_path, capsys):
    """invert is a string field that preprocess checks (key=value reads invert=true as a boolean, which a
    choice among 'auto', 'true', 'false' would refuse as 'True'): the same answer as before, and true works."""
    from PIL import Image

    image = tmp_path / "digit.png"
    Image.new("L", (8, 8), 0).save(image)
    assert predict.main(["vae-digits", str(image), "invert=maybe"]) == 2
    out = capsys.readouterr()
    assert out.err.strip().splitlines() == ["error: invert must be auto, true or false, got 'maybe'"], out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digit.png"]
    assert predict.main(["vae-digits", str(image), "invert=true"]) == 0
    assert "negative ELBO" in capsys.readouterr().out and (tmp_path / "digit_recon.png").is_file()
