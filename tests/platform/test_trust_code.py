"""Loading someone else's file imports only what the user chose: a checkpoint, a ``save_pretrained`` folder (what
``hf://owner/repo`` fetches) or a card that names its model, estimator or datamodule by a dotted path is refused
before that module is imported (its import-time code would run), with the fix; ``trust_code=True`` (the command
lines' ``--trust-code``) imports it, as the Hub's ``trust_remote_code``."""

import json
import uuid

import pytest
import torch
from platform_testlib import released_checkpoint
from safetensors.torch import save_file

import zoo
from zoo.core.module import ZooModule
from zoo.errors import UserError
from zoo.paths import sha256


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """(module name, marker file): a module on sys.path whose import writes the marker."""
    name = f"planted_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "imported"
    (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                         "class Model:\n    pass\n\nclass Est:\n    pass\n\nclass Data:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, marker
    monkeypatch.delitem(__import__("sys").modules, name, raising=False)


def model_folder(folder, model):
    """A folder as save_pretrained writes it (what hf://owner/repo downloads), its config.json naming ``model``."""
    folder.mkdir()
    save_file({"w": torch.zeros(2)}, str(folder / "model.safetensors"))
    card = {"zoo_format": 1, "name": "x", "model": model, "hyper_parameters": {}, "data": None,
            "weights": "model.safetensors", "sha256": sha256(folder / "model.safetensors")}
    (folder / "config.json").write_text(json.dumps(card))
    return str(folder)


def refused(load, marker, kind, name):
    with pytest.raises(UserError) as err:
        load()
    first = str(err.value).splitlines()[0]
    assert f"{kind} '{name}'" in first and "trust_code=True" in first and "--trust-code" in first, first
    assert "zoo." + kind + "s" in str(err.value)  # or install the plugin: its entry point group
    assert not marker.exists(), "the module named by the file was imported"


def test_a_checkpoint_naming_a_dotted_model_is_refused_before_its_import(planted, tmp_path):
    module, marker = planted
    ckpt = released_checkpoint(tmp_path / "m.ckpt", model=f"{module}:Model")
    refused(lambda: zoo.load(ckpt), marker, "model", f"{module}:Model")
    with pytest.raises(UserError, match="not a model"):  # trusted: imported, then found not to be a model
        zoo.load(ckpt, trust_code=True)
    assert marker.exists()


def test_a_checkpoint_naming_a_dotted_estimator_is_refused_before_its_import(planted, tmp_path):
    module, marker = planted
    ckpt = released_checkpoint(tmp_path / "e.ckpt", estimator=f"{module}:Est")
    refused(lambda: zoo.load(ckpt), marker, "estimator", f"{module}:Est")
    with pytest.raises(UserError, match="sample"):  # trusted: imported, then found to lack sample() and loss()
        zoo.load(ckpt, trust_code=True)
    assert marker.exists()


def test_a_hub_folder_naming_a_dotted_model_is_refused_before_its_import(planted, tmp_path):
    module, marker = planted
    folder = model_folder(tmp_path / "repo", f"{module}:Model")
    refused(lambda: zoo.load(folder), marker, "model", f"{module}:Model")
    refused(lambda: ZooModule.from_pretrained(folder), marker, "model", f"{module}:Model")
    with pytest.raises(UserError, match="not a model"):
        ZooModule.from_pretrained(folder, trust_code=True)
    assert marker.exists()


def test_the_command_lines_refuse_it_and_take_trust_code(planted, tmp_path, capsys):
    from zoo.evaluate import main as evaluate_main
    from zoo.predict import main as predict_main

    module, marker = planted
    ckpt = released_checkpoint(tmp_path / "m.ckpt", model=f"{module}:Model")
    for command in (evaluate_main, predict_main):
        assert command([ckpt]) == 2
        assert "--trust-code" in capsys.readouterr().err.splitlines()[0]
        assert not marker.exists()
    assert predict_main([ckpt, "--trust-code"]) == 2  # imported now, then refused as not a model
    assert marker.exists() and "not a model" in capsys.readouterr().err


def test_evaluate_refuses_a_dotted_datamodule_of_the_checkpoint_but_takes_the_users_own(planted, tmp_path):
    from zoo.evaluate import evaluate

    module, marker = planted
    ckpt = released_checkpoint(tmp_path / "d.ckpt", data=f"{module}:Data")
    refused(lambda: evaluate(ckpt), marker, "datamodule", f"{module}:Data")
    with pytest.raises(UserError, match="not a datamodule"):  # data.name= on the command line: the user's own
        evaluate(ckpt, {"data.name": f"{module}:Data"})
    assert marker.exists()


def test_a_loaded_ood_model_looks_up_its_files_datamodule_as_zoo_load_did(planted):
    """The OOD model fits a missing threshold on the data its run info names, after zoo.load returned."""
    module, marker = planted
    model = zoo.load("ood-digits-ce")
    model.run_info["data"] = {**model.run_info["data"], "name": f"{module}:Data"}
    refused(model.validation_inputs, marker, "datamodule", f"{module}:Data")
