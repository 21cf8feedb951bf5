"""``load_config``'s tree is read-only at every level (a change is a TypeError; what is saved gets plain dicts and
lists), and an estimator spec is checked once: by the recipe loader for ``python -m zoo.train`` (the model builds
from that check), by the model where it is built from Python."""

import copy
import dataclasses
import json
import pickle

import pytest
import torch

import zoo.config
import zoo.estimators.seam
from zoo.config import load_config, to_yaml
from zoo.errors import UserError
from zoo.registry import MODELS
from zoo.schema import thaw
from zoo.train import train


def test_the_loaded_config_refuses_every_change():
    cfg = load_config("dvae_digits", ["callbacks=[{name: grad_variance, every_n_steps: 5}]"]).settings
    changes = [lambda: cfg.__setitem__("seed", 1), lambda: cfg["model"].__setitem__("lr", 1.0),
               lambda: cfg["trainer"].update(max_epochs=1), lambda: cfg.pop("seed"),
               lambda: cfg["logger"].append("wandb"), lambda: cfg["callbacks"][0].__setitem__("every_n_steps", 1),
               lambda: cfg["wandb"]["tags"].extend(["x"]), lambda: cfg["checkpoint"].setdefault("monitor", "x")]
    for change in changes:
        with pytest.raises(TypeError, match="read-only"):
            change()
    with pytest.raises(TypeError, match="read-only"):
        del cfg["model"]["name"]
    assert cfg["model"]["name"] == "dvae" and isinstance(cfg["model"], dict) and cfg["logger"] == ["csv"]
    changed = dict(cfg, seed=1)  # a new value: a plain copy of the level it changes
    changed["threads"] = 2
    assert changed["seed"] == 1 and cfg["seed"] == 0 and "threads" in cfg


def test_what_is_saved_gets_plain_dicts_and_lists():
    cfg = load_config("dvae_digits", ["wandb.tags=[a,b]"]).settings
    plain = thaw(cfg)
    assert plain == cfg and type(plain["wandb"]) is dict and type(plain["wandb"]["tags"]) is list
    assert "tags:\n  - a\n  - b\n" in to_yaml(cfg)
    assert json.loads(json.dumps(cfg)) == plain
    assert copy.deepcopy(cfg) == cfg and pickle.loads(pickle.dumps(cfg)) == cfg


def counted_check_spec(monkeypatch) -> list:
    """check_spec, counted wherever it is called from (zoo.config holds its own name for it)."""
    calls = []
    original = zoo.estimators.seam.check_spec

    def check_spec(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(zoo.estimators.seam, "check_spec", check_spec)
    monkeypatch.setattr(zoo.config, "check_spec", check_spec)
    return calls


def test_a_run_checks_its_estimator_spec_once(tmp_path, monkeypatch):
    calls = counted_check_spec(monkeypatch)
    result = train(["recipe=dvae_digits", "model.estimator={name: gumbel_softmax, tau: 0.5}",
                    "trainer.fast_dev_run=true", f"run_dir={tmp_path}/runs"])
    assert calls == [{"name": "gumbel_softmax", "tau": 0.5}]
    assert result.model.estimator.name == "gumbel_softmax" and result.model.estimator.options.tau == 0.5


def test_a_run_saves_its_config_as_plain_values(tmp_path):
    result = train(["recipe=dvae_digits", "wandb.tags=[a]", "trainer.max_steps=1", "trainer.limit_val_batches=1",
                    "test_after_fit=false", f"run_dir={tmp_path}/runs"])
    saved = torch.load(result.run_dir / "checkpoints" / "last.ckpt", weights_only=True)  # no zoo class inside
    assert saved["zoo"]["config"]["wandb"]["tags"] == ["a"] and saved["zoo"]["config"]["data"] == saved["zoo"]["data"]
    assert "tags:\n  - a\n" in (result.run_dir / "config.yaml").read_text()


def test_a_model_built_directly_checks_its_estimator_spec(monkeypatch):
    calls = counted_check_spec(monkeypatch)
    dvae, info = MODELS.get("dvae"), {"image_shape": [1, 8, 8], "binarize": False}
    with pytest.raises(UserError, match="(?s)cannot train DiscreteVAE's categorical node.*Estimators that fit"):
        dvae({"estimator": "reparam"}, info)
    with pytest.raises(UserError, match="unknown estimator 'reinfroce'"):
        dvae({"estimator": "reinfroce"}, info)
    assert dvae({"estimator": "rloo", "n_samples": 2}, info).estimator.name == "rloo"
    assert calls == ["reparam", "reinfroce", "rloo"]  # once each


def test_the_loaded_run_carries_its_options_objects_and_monitor():
    """``load_config`` returns one object: the read-only settings, the options objects the model: and data: sections
    were validated into (the constructors take them as given) and the model's monitor."""
    from zoo.runner import build

    run = load_config("vae_digits", ["model.latent_dim=3", "data.num_workers=0"])
    assert run["model"] is run.settings["model"] and run.get("seed") == 0 and run.get("nothing") is None
    assert run.model_options.latent_dim == 3 and run.monitor == ("val/loss", "min")
    datamodule, model = build(run)
    assert model.cfg is run.model_options and datamodule.cfg is run.data_options
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.monitor = ("val/rec", "min")


def test_a_run_states_its_monitor_once(tmp_path, monkeypatch):
    """The model's monitor is stated when the recipe loads; the Trainer's best checkpoint reads it from there."""
    calls = []
    original = zoo.config.run_monitor

    def run_monitor(name, cfg):
        calls.append(name)
        return original(name, cfg)

    monkeypatch.setattr(zoo.config, "run_monitor", run_monitor)
    monkeypatch.setattr("zoo.runner.run_monitor", run_monitor, raising=False)  # wherever it is called from
    result = train(["recipe=vae_digits", "trainer.fast_dev_run=true", f"run_dir={tmp_path}/runs"])
    assert calls == ["vae"] and result.model.monitor == "val/loss"
