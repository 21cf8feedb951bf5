"""User mistakes with the tools around training: checkpoints, pretrained cards, ``zoo.evaluate``,
``zoo.predict``, ``zoo.pretrained`` and their command lines. One message, exit status 2, no
traceback, nothing half-written (training's own mistakes: test_user_errors.py)."""

import pickle

import lightning  # noqa: F401  (imported here, not first inside a test: its log handler keeps the real stderr)
import pytest
import torch
from platform_testlib import one_message, run_main

import zoo
from zoo import evaluate, predict
from zoo.errors import UserError
from zoo.train import main


@pytest.fixture
def trained(toy_recipe, tmp_path):
    assert main([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", "trainer.max_epochs=1"]) == 0
    return next((tmp_path / "runs").glob("*/*/checkpoints/last.ckpt"))


def test_checkpoint_missing_corrupt_foreign_unsafe(tmp_path, capsys):
    corrupt = tmp_path / "corrupt.ckpt"
    corrupt.write_bytes(b"\x00garbage" * 100)
    foreign = tmp_path / "foreign.ckpt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, foreign)
    unsafe = tmp_path / "unsafe.ckpt"

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    with open(unsafe, "wb") as f:
        pickle.dump({"zoo": Evil()}, f)
    empty = tmp_path / "empty.ckpt"
    empty.write_bytes(b"")  # an EOFError with no message
    noise = tmp_path / "noise.ckpt"  # not blamed on "objects that are not plain weights"
    noise_bytes = torch.randint(0, 256, (300,), generator=torch.Generator().manual_seed(0)).tolist()
    noise.write_bytes(bytes([0x17, *noise_bytes]))
    cases = [(tmp_path / "missing.ckpt", "checkpoint not found"), (corrupt, "corrupt"), (empty, "corrupt"),
             (noise, "corrupt or not a PyTorch file"),
             (foreign, "not a zoo checkpoint"), (unsafe, "besides tensors and plain values, which loading could run")]
    for path, expected in cases:
        assert evaluate.main([str(path)]) == 2
        err = capsys.readouterr()
        assert expected in err.err and "Traceback" not in err.err and "pwned" not in err.out
        assert "weights_only` set to `False`" not in err.err and "Warning" not in err.err  # torch's unsafe advice
    assert evaluate.main([""]) == 2  # not "'.' is a folder, not a checkpoint"
    assert "nothing to load (an empty name)" in capsys.readouterr().err
    with pytest.raises(UserError, match="nothing to load"):
        zoo.load(None)  # not a bare TypeError


def test_truncated_checkpoint_and_a_folder_for_a_checkpoint(toy_recipe, tmp_path, capsys):
    whole = tmp_path / "whole.ckpt"
    torch.save({"zoo": {}, "state_dict": {"w": torch.zeros(1000)}}, whole)
    cut = tmp_path / "cut.ckpt"  # more than "([Errno 22] Invalid argument)"
    cut.write_bytes(whole.read_bytes()[:2000])
    assert evaluate.main([str(cut)]) == 2
    err = capsys.readouterr().err
    assert "is truncated or corrupt" in err and "Pass a complete .ckpt written by `python -m zoo.train`" in err, err
    run = tmp_path / "runs" / "toy" / "20260101-000000"  # not "no such file"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"")
    hint = f"is a folder, not a checkpoint: pass a .ckpt file, e.g. {run / 'checkpoints' / 'last.ckpt'}"
    assert evaluate.main([str(tmp_path / "runs" / "toy")]) == 2
    err = capsys.readouterr().err
    assert hint in err and len(err.strip().splitlines()) == 1, err
    code, err = run_main([f"recipe={toy_recipe}", f"ckpt_path={run}", f"run_dir={tmp_path}/again"], capsys)
    assert code == 2 and hint in err and not (tmp_path / "again").exists(), err


def test_pretrained_weights_changed_since_their_release(tmp_path, capsys, monkeypatch):
    import shutil

    import zoo.loading

    shutil.copy(zoo.loading.PRETRAINED_DIR / "vae-digits.json", tmp_path)
    (tmp_path / "vae-digits.safetensors").write_bytes(b"edited")
    monkeypatch.setattr(zoo.loading, "PRETRAINED_DIR", tmp_path)
    assert evaluate.main(["vae-digits"]) == 2
    err = capsys.readouterr().err
    assert "does not match the card's" in err and "Restore the released file" in err and "git checkout --" in err


@pytest.mark.parametrize("target, data, expected", [
    ("maml-sinusoid", "digits", "maml needs a few-shot datamodule"),  # else a TypeError in adaptation_curve
    ("vae-digits", "sinusoid", "the VAE needs data_info['image_shape']"),  # else a ValueError in test_step
])
def test_evaluate_on_a_datamodule_of_another_kind(target, data, expected, capsys):
    assert evaluate.main([target, f"data.name={data}"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and err.strip().splitlines()[-1].startswith("error: "), err


def test_a_broken_pretrained_card_is_refused(tmp_path, capsys, monkeypatch):
    import zoo.loading

    (tmp_path / "vae-digits.json").write_text("{not json")  # not a JSONDecodeError traceback
    monkeypatch.setattr(zoo.loading, "PRETRAINED_DIR", tmp_path)
    assert evaluate.main(["vae-digits"]) == 2
    err = capsys.readouterr().err
    assert "pretrained card" in err and "vae-digits.json" in err and one_message(err), err


def test_checkpoint_of_another_model_is_refused(trained, tmp_path, capsys):
    other = tmp_path / "other.yaml"
    other.write_text("model: {name: 'toymodel:Toy2'}\ndata: {name: 'toymodel:ToyData'}\n")
    code, err = run_main([f"recipe={other}", f"ckpt_path={trained}"], capsys)
    assert code == 2 and "Toy2" in err


def test_resuming_with_other_sizes_is_refused_before_the_run_folder(trained, tmp_path, capsys):
    # else a size-mismatch RuntimeError inside fit, with a new run folder (logs/resume-1) left behind
    code, err = run_main([f"recipe={tmp_path / 'toy.yaml'}", f"ckpt_path={trained}", "model.hidden=3",
                          f"run_dir={tmp_path}/again"], capsys)
    assert code == 2 and "does not fit the model" in err and "Traceback" not in err, err
    assert one_message(err) and not (tmp_path / "again").exists()
    assert "this command differs in model.hidden: 16 there, 3 here" in err  # the option, not only the weights


def test_evaluate_and_predict_bad_options(trained, capsys):
    assert evaluate.main([str(trained), "bogus=1"]) == 2
    assert "unknown option 'bogus'" in capsys.readouterr().err
    assert evaluate.main([str(trained), "data.batch_sise=3", "--trust-code"]) == 2  # toymodel:Toy, by dotted path
    assert "batch_size" in capsys.readouterr().err
    assert predict.main(["no-such-model"]) == 2
    assert "unknown pretrained model" in capsys.readouterr().err


@pytest.mark.parametrize("option, expected", [
    ("seed=-1", "'seed' in zoo.evaluate's options (besides data.KEY= and trainer.KEY=) must be an integer from 0"),
    ("seed=4294967296", "must be an integer from 0"),  # else ValueErrors from seed_everything
    ("plots_dir=FILE", "is a file, not a folder"),  # else a FileExistsError from the model's plots
    ("trainer.limit_test_batches=1.5", "invalid trainer option"),  # else a MisconfigurationException
])
def test_evaluate_bad_options(option, expected, trained, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert evaluate.main([str(trained), option.replace("FILE", str(tmp_path / "file")), "--trust-code"]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("name", ["", "../escape", "a/b", ".hidden"])
def test_export_refuses_a_name_that_is_not_a_file_stem(name, trained, capsys):
    # '' would write zoo/pretrained/.json and .safetensors; '../x' end in a SafetensorError traceback
    from zoo.pretrained.__main__ import main as pretrained_main

    assert pretrained_main(["export", str(trained), "--name", name]) == 2
    err = capsys.readouterr().err
    assert "cannot name an entry" in err and len(err.strip().splitlines()) == 1, err


def test_export_does_not_overwrite_an_entry_without_replace(trained, capsys):
    """A released card (here vae-digits) is not overwritten by a reused --name, nor shadowed by an export of
    that name into ./pretrained/ (zoo.load would load the released one)."""
    from zoo.loading import PRETRAINED_DIR
    from zoo.pretrained.__main__ import main as pretrained_main

    card = PRETRAINED_DIR / "vae-digits.json"
    before = card.read_bytes()
    assert pretrained_main(["export", str(trained), "--name", "vae-digits", "--out", str(PRETRAINED_DIR)]) == 2
    err = capsys.readouterr().err
    assert "exists" in err and "--replace" in err and len(err.strip().splitlines()) == 1, err
    assert card.read_bytes() == before
    assert pretrained_main(["export", str(trained), "--name", "vae-digits"]) == 2
    err = capsys.readouterr().err
    assert "name of a released entry" in err and len(err.strip().splitlines()) == 1, err


def test_predict_inputs_may_look_like_flags(capsys):
    # a 2-D point "-4,1.5" is an input, not an unknown flag: the message is about the target
    assert predict.main(["no-such-model", "-4,1.5", "steps=3"]) == 2
    err = capsys.readouterr().err
    assert "unknown pretrained model" in err and "unrecognized arguments" not in err


@pytest.mark.parametrize("argv, expected", [
    (["vae-digits", "n=-1", "out=OUT/x.png"], "'n' in VAE predict must be >= 1, got -1"),  # else a RuntimeError
    (["vae-digits", "n=0", "out=OUT/x.png"], "must be >= 1"),
    (["vae-digits", "n=4", "out=OUT"], "is a folder"),  # else tracebacks from save_image
    (["maml-sinusoid", "out=OUT"], "is a folder"),  # else found by savefig after the fine-tuning
    (["dvae-digits", "n=4", "out=OUT/s.txt"], "'.txt' is not a format the zoo can write images in"),  # else PIL's
    (["maml-sinusoid", "out=OUT/fit.txt"], "'.txt' is not a format the zoo can write figures in"),  # ValueErrors
    (["maml-sinusoid", "nan,1", "out=OUT/fit.png"], "point 'nan,1' is not finite"),  # else exit 0, printing nan
])
def test_predict_refuses_bad_counts_and_output_paths(argv, expected, tmp_path, capsys):
    assert predict.main([a.replace("OUT", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [["vae-digits", "n=4"], ["maml-sinusoid", "steps=1"], ["vae-digits", "IMG", "n=4"]])
def test_predict_out_makes_its_folder_and_refuses_a_file_in_the_way(argv, tmp_path, capsys):
    """out= may name a new folder, as overlay= and export= may (the three behave alike);
    a file standing where one of its folders would be is refused before any work, with nothing written."""
    from PIL import Image

    image = tmp_path / "in" / "digit.png"
    image.parent.mkdir()
    Image.new("L", (28, 28), 200).save(image)
    argv = [str(image) if a == "IMG" else a for a in argv]
    out = tmp_path / "new" / "deeper" / "out.png"
    assert predict.main([*argv, f"out={out}"]) == 0, capsys.readouterr().err
    assert out.stat().st_size > 0
    (tmp_path / "afile").write_text("x")
    before = sorted(tmp_path.rglob("*"))
    capsys.readouterr()
    assert predict.main([*argv, f"out={tmp_path / 'afile' / 'out.png'}"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'afile'} is a file, not a folder" in err and len(err.strip().splitlines()) == 1, err
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("target", ["sat-shapes-soft", "ood-digits-joint", "vae-digits"])
def test_predict_given_a_folder_for_an_image(target, tmp_path, capsys):
    # else sat: an IsADirectoryError traceback; ood, vae: "image not found" for a path that exists
    assert predict.main([target, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path} is a folder, not an image: give image files" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args, expected", [
    (["--out", "OUT/p.txt"], "'.txt' is not a format the zoo can write figures in"),  # the draws
    (["--theta", "nan"], "--theta must be a finite number"),  # else a ValueError from torch.distributions
])
def test_estimators_compare_refuses_bad_values_before_the_draws(args, expected, tmp_path, capsys, monkeypatch):
    from zoo.estimators.__main__ import main as estimators_main

    monkeypatch.chdir(tmp_path)  # where the default --out would be written
    assert estimators_main(["compare", "--draws", "10", *(a.replace("OUT", str(tmp_path)) for a in args)]) == 2
    err = capsys.readouterr().err
    assert expected.replace("OUT", str(tmp_path)) in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


def test_estimators_compare_out_makes_its_folder_and_refuses_a_file_in_the_way(tmp_path, capsys):
    """--out may name a new folder, as every zoo output may (savefig alone fails there, after the draws);
    a file standing where a folder would be is refused before them."""
    from zoo.estimators.__main__ import main as estimators_main

    out = tmp_path / "new" / "deeper" / "p.png"
    assert estimators_main(["compare", "--draws", "10", "--out", str(out)]) == 0
    assert out.stat().st_size > 0
    (tmp_path / "afile").write_text("x")
    capsys.readouterr()
    assert estimators_main(["compare", "--draws", "10", "--out", str(tmp_path / "afile" / "p.png")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'afile'} is a file, not a folder" in err and len(err.strip().splitlines()) == 1, err


def test_evaluate_switches_the_datamodule_with_data_name(tmp_path, capsys):
    """`zoo.evaluate NAME data.name=OTHER` evaluates on another datamodule (here: the real-image one,
    whose files are missing, so its own clear error), instead of 'unknown option data'."""
    from zoo.evaluate import main as evaluate_main

    code = evaluate_main(["ood-digits-ce", "data.name=ood_images", f"data.root={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2 and "not found" in err and str(tmp_path) in err and "unknown option" not in err, err
    # the old datamodule's own options (digits' test_size) are dropped, not refused as unknown keys
    code = evaluate_main(["vae-digits", "data.name=mnist", f"data.root={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown key" not in err and str(tmp_path) in err, err


def test_evaluate_without_arguments_asks_for_the_target_only(capsys):
    assert evaluate.main([]) == 2  # the usage shows key=value as optional
    err = capsys.readouterr().err
    assert "required: target" in err and "key=value" not in err, err


@pytest.mark.parametrize("module, argv", [
    ("zoo.train", []),  # no recipe: not the usage with exit 0
    ("zoo.evaluate", []),  # no target
    ("zoo.evaluate", ["vae-digits", "--jsn"]),  # a mistyped flag
    ("zoo.predict", []),
    ("zoo.pretrained.__main__", ["exprt"]),  # a mistyped sub-command
    ("zoo.pretrained.__main__", ["export", "x.ckpt"]),  # export without --name
    ("zoo.estimators.__main__", ["compar"]),
])
def test_command_line_usage_mistakes_are_one_line(module, argv, capsys):
    """argparse's own errors (its usage block, then the error) are one 'error:' line too."""
    import importlib

    try:
        code = importlib.import_module(module).main(argv)
    except SystemExit as exit:
        code = exit.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "--help" in lines[0], err


def test_caption_overlay_with_an_unwritable_extension_is_refused_before_decoding(tmp_path, capsys):
    # else savefig's ValueError comes after the decoding, and the overlay's folder is made by then
    from PIL import Image

    image = tmp_path / "in" / "shape.png"
    image.parent.mkdir()
    Image.new("RGB", (64, 64), (200, 30, 30)).save(image)
    out = tmp_path / "out" / "new" / "att.txt"
    assert predict.main(["sat-shapes-soft", str(image), f"overlay={out}"]) == 2
    err = capsys.readouterr().err
    assert "'.txt' is not a format the zoo can write figures in" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
