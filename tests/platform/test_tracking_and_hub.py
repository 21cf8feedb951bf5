"""W&B offline, pretrained export/load with sha256 checks, --help/--list, print_config."""

import importlib.util
import json
import subprocess
import sys

import pytest
import torch
from platform_testlib import subprocess_env

import zoo
import zoo.loading
from zoo.errors import UserError
from zoo.pretrained.__main__ import export
from zoo.tracking import wandb_mode
from zoo.train import main, train


def test_wandb_missing_is_a_user_error(toy_recipe, tmp_path, monkeypatch):
    """wandb is a declared dependency; an environment without it (issue 13's GPU machine) gets the
    zoo's one-line message, not an ImportError traceback."""
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    with pytest.raises(UserError, match="pip install wandb"):
        train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "logger=[csv,wandb]", "trainer.max_epochs=1"])


def test_wandb_offline_run_writes_local_files(toy_recipe, tmp_path, monkeypatch, capfd):
    if importlib.util.find_spec("wandb") is None:  # a broken install: check the message instead
        test_wandb_missing_is_a_user_error(toy_recipe, tmp_path, monkeypatch)
        return
    monkeypatch.setenv("WANDB_MODE", "offline")
    result = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "logger=[csv,wandb]", "trainer.max_epochs=1"])
    offline = list((result.run_dir / "wandb").glob("offline-run-*"))
    assert offline and any(offline[0].rglob("*.wandb")), "offline W&B run files to `wandb sync` later"
    assert (result.run_dir / "plots" / "weights.png").is_file()
    assert (result.run_dir / "plots" / "weights_image.png").is_file()
    assert list(offline[0].rglob("media/images/plots/*.png")), "figures logged to W&B"
    assert "anonymous setting" not in capfd.readouterr().err  # wandb's warning on every run, for Lightning's None


def test_tensorboard_logger(toy_recipe, tmp_path):
    result = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "logger=[tensorboard]", "trainer.max_epochs=1"])
    assert list((result.run_dir / "tensorboard").glob("events.out.tfevents.*"))


def test_wandb_without_credentials_falls_back_to_offline(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    assert wandb_mode(None)[0] == "offline"
    assert wandb_mode("online") == ("offline", "no credentials: `wandb login` to log online")
    assert wandb_mode("disabled") == ("disabled", "")
    (tmp_path / ".netrc").write_text("machine api.example.test login user password k\n")
    (tmp_path / ".netrc").chmod(0o600)
    assert wandb_mode(None, "https://api.example.test") == ("online", ""), "`wandb login --host`'s key is found"


@pytest.fixture
def exported(toy_recipe, tmp_path, monkeypatch):
    result = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.max_epochs=2"])
    monkeypatch.setattr(zoo.loading, "PRETRAINED_DIR", tmp_path)
    weights = export(str(result.run_dir / "checkpoints" / "last.ckpt"), "toy-test", "a toy", {}, out_dir=tmp_path,
                     trust_code=True)  # the toy model is named by dotted path (toymodel:Toy)
    return result, weights


def test_pretrained_roundtrip_and_card(exported, tmp_path):
    result, weights = exported
    card = json.loads(weights.with_suffix(".json").read_text())
    assert card["model"] == "toymodel:Toy" and card["metrics_split"] == "test"
    assert card["command"].startswith("python -m zoo.train recipe=")
    assert "run_dir" not in card["command"]  # the training machine's folder is left out
    assert card["checkpoint"] == {"file": "last.ckpt", "epoch": 1, "step": card["trained_steps"]}  # epochs from 0
    model = zoo.load("toy-test", trust_code=True)
    x = torch.randn(4, 8)
    assert torch.allclose(model.net(x), result.model.eval().net(x))
    from zoo.evaluate import evaluate

    assert evaluate("toy-test", trust_code=True) == pytest.approx(card["metrics"], rel=1e-6)


def test_pretrained_hash_mismatch_and_unknown_name(exported):
    _, weights = exported
    with pytest.raises(UserError, match="unknown pretrained model 'toy-tset'.*toy-test"):
        zoo.load("toy-tset")
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(UserError, match="sha256"):
        zoo.load("toy-test", trust_code=True)


def test_a_re_export_that_fails_part_way_leaves_the_old_entry_whole(exported, tmp_path, monkeypatch):
    import errno

    import zoo.pretrained.__main__ as pretrained_cli

    result, weights = exported
    before = {p.name: p.read_bytes() for p in tmp_path.glob("toy-test.*")}

    def full_disk(*args, **kwargs):  # the card is written after the weights: fail there
        raise OSError(errno.ENOSPC, "No space left on device")

    retrained = torch.load(result.run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    retrained["state_dict"] = {k: v + 1 for k, v in retrained["state_dict"].items()}  # other weights
    torch.save(retrained, tmp_path / "retrained.ckpt")
    with monkeypatch.context() as patch, pytest.raises(OSError):
        patch.setattr(pretrained_cli.json, "dumps", full_disk)
        export(str(tmp_path / "retrained.ckpt"), "toy-test", "again", {}, out_dir=tmp_path, replace=True,
               trust_code=True)
    assert {p.name: p.read_bytes() for p in tmp_path.glob("toy-test.*")} == before  # weights and card as they were
    assert not list(tmp_path.glob(".toy-test.*"))  # no temporary file left
    assert zoo.load("toy-test", trust_code=True) is not None  # the hash still matches


def test_help_list_and_print_config(toy_recipe, capsys):
    assert main(["--help"]) == 0 and "recipe=NAME" in capsys.readouterr().out
    assert main(["--list"]) == 0
    assert main([f"recipe={toy_recipe}", "print_config=true", "model.hidden=7"]) == 0
    out = capsys.readouterr().out
    assert "hidden: 7" in out and "max_epochs: 3" in out


def test_help_is_fast_and_imports_no_torch():
    code = "import sys, zoo.train; zoo.train.main(['--list']); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True, text=True)
    assert out.stdout.strip().splitlines()[-1] == "False", "--list must not import torch (start-up time)"


def test_metric_tables_keep_their_columns_and_number_order():
    """Names longer than 28 characters keep zoo.train's columns; loss_10 sorts after loss_2, not before."""
    from zoo.cli import format_table, in_order

    metrics = {"test/loss_10": 1.0, "test/loss_2": 2.0, "test/planted_analogies_form-a-to-b": 0.5, "test/b": 3.0}
    assert [k for k, _ in in_order(metrics)] == ["test/b", "test/loss_2", "test/loss_10",
                                                 "test/planted_analogies_form-a-to-b"]
    rows = format_table(metrics).splitlines()
    assert len({row.rindex(" ") for row in rows}) == 1, rows  # every value starts in one column


def test_a_checkpoint_with_an_option_the_model_no_longer_has_is_one_message(toy_recipe, tmp_path):
    """A checkpoint of another zoo version (an option renamed since) is one message, not a TypeError traceback, in
    zoo.evaluate and zoo.load."""
    import torch

    from zoo.errors import UserError
    from zoo.loading import load_any
    from zoo.train import train

    run = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", "trainer.max_epochs=1", "test_after_fit=false"])
    ckpt = torch.load(run.run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    ckpt["hyper_parameters"]["cfg"]["hiddn"] = 8
    old = tmp_path / "old.ckpt"
    torch.save(ckpt, old)
    with pytest.raises(UserError, match=r"holds option 'hiddn' that model .* no longer has \(did you mean: hidden\?\)"
                                        r": it was written by another version of the zoo"):
        load_any(str(old), trust_code=True)
