"""The recipe key ``compile``: its value is checked before torch is imported, a model that refuses it refuses
before anything runs, and the model's nets are compiled in place, so that a compiled run's checkpoints hold the
uncompiled model's keys: they load into an uncompiled model and back, resume exactly, and ``zoo.load`` and the
pretrained export read them as any other. The plumbing is tested with the eager backend (dynamo traces the nets,
nothing is generated); one slow test runs inductor."""

import shutil

import pytest
import torch
from platform_testlib import assert_refused, heavy_modules_imported_by, run_main
from safetensors.torch import load_file
from torch._dynamo.utils import counters

import zoo
from zoo.pretrained.__main__ import main as pretrained_main
from zoo.registry import MODELS
from zoo.train import train

EAGER = "compile={backend: eager}"
TOY = ["trainer.deterministic=true", "test_after_fit=false", "trainer.max_epochs=3"]
SIGNAL_AT_11 = "callbacks=[{name: 'toymodel:SignalAt', step: 11}]"  # 8 steps an epoch: mid-epoch 1
REFUSING = {"maml_sinusoid": "maml", "maml_nav2d": "maml_rl", "skipgram_synthetic": "skipgram"}  # recipe: model


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for key in a:
        assert torch.equal(a[key], b[key]), key


def graphs_compiled() -> int:
    """Graphs dynamo has compiled in this process since the counters were last cleared."""
    return counters["stats"]["unique_graphs"]


@pytest.mark.parametrize("item, expected", [
    ("compile=max-autotune", r"a mode is given as an option, compile=\{mode: max-autotune\}"),
    ("compile={mdoe: default}", r"unknown option 'mdoe' in compile .*\(did you mean: mode\?\)"),
    ("compile={mode: fastest}", r"compile.mode='fastest' .*: mode is one of default, reduce-overhead"),
    ("compile={fullgraph: 1}", "fullgraph is true or false"),
    ("compile={mode: default, options: {}}", "gives both mode and options"),
    ("compile=3", "must be true, false or a mapping of torch.compile's options"),
    ("compile={backend: inductr}", r"compile.backend=inductr is not a torch.compile backend \(did you mean: inductor"),
])
def test_a_wrong_compile_value_is_one_message_with_its_fix(toy_recipe, tmp_path, capsys, item, expected):
    code, err = run_main([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", item], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_compile_mistakes_and_refusals_are_answered_before_torch_is_imported():
    code = ("import sys\n"
            "from zoo.config import load_config\n"
            "from zoo.errors import UserError\n"
            "for recipe, item in [('vae_digits', 'compile={mode: fast}'), ('vae_digits', 'compile=[eager]'),\n"
            "                     ('maml_sinusoid', 'compile=true'), ('skipgram_synthetic', 'compile={}')]:\n"
            "    try:\n"
            "        load_config(recipe, [item])\n"
            "    except UserError:\n"
            "        continue\n"
            "    raise SystemExit(f'{recipe} {item} was taken')\n"
            "load_config('vae_digits', ['compile={mode: max-autotune, backend: inductor, dynamic: false}'])\n")
    assert heavy_modules_imported_by(code) == []


@pytest.mark.parametrize("recipe", sorted(REFUSING))
def test_a_model_that_cannot_be_compiled_refuses_the_key_before_training(recipe, tmp_path, capsys):
    code, err = run_main([f"recipe={recipe}", f"run_dir={tmp_path}/runs", "compile=true"], capsys)
    assert_refused(code, err, rf"model '{REFUSING[recipe]}' takes no compile: .*\n  why: its .+", tmp_path / "runs")


def test_a_model_whose_compiled_names_no_submodule_it_has_is_refused(toy_recipe, tmp_path, capsys):
    code, err = run_main([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", "model.name=toymodel:ToyMisnamed",
                          EAGER], capsys)
    assert_refused(code, err, r"ToyMisnamed has none of the submodules its `compiled` names \(nett\)",
                   tmp_path / "runs")


def test_every_model_names_what_compile_compiles_or_why_it_refuses():
    for name in MODELS.list():
        compiled = MODELS.spec(name).compiled
        assert (isinstance(compiled, tuple) and compiled and all(isinstance(n, str) for n in compiled)
                or isinstance(compiled, str) and compiled.startswith("its ")), name


def test_a_compiled_runs_checkpoints_resume_exactly_compiled_or_not(toy_recipe, tmp_path):
    """Cut at step 11 (mid-epoch) by a signal, a compiled run resumes compiled and uncompiled from the same
    checkpoint, an uncompiled run cut there resumes compiled, and all end with the straight compiled run's
    weights, which are the uncompiled run's."""
    opts = [f"recipe={toy_recipe}", *TOY]
    torch._dynamo.reset()
    counters.clear()
    straight = train([*opts, f"run_dir={tmp_path}/straight", EAGER])
    assert graphs_compiled() >= 1 and straight.model.net._compiled_call_impl is not None
    plain = train([*opts, f"run_dir={tmp_path}/plain"])
    cut = train([*opts, f"run_dir={tmp_path}/cut", EAGER, SIGNAL_AT_11])
    assert cut.interrupted and load(cut.run_dir / "checkpoints" / "last.ckpt")["global_step"] == 11
    twin = tmp_path / "twin" / cut.run_dir.name
    shutil.copytree(cut.run_dir, twin)
    compiled = train([*opts, f"run_dir={tmp_path}/cut", EAGER, "ckpt_path=last"])
    uncompiled = train([*opts, f"run_dir={tmp_path}/twin", f"ckpt_path={twin}/checkpoints/last.ckpt"])
    plain_cut = train([*opts, f"run_dir={tmp_path}/plain_cut", SIGNAL_AT_11])
    assert plain_cut.interrupted
    compiled_later = train([*opts, f"run_dir={tmp_path}/plain_cut", EAGER, "ckpt_path=last"])
    a = load(straight.run_dir / "checkpoints" / "last.ckpt")
    assert a["global_step"] == 24 and list(a["state_dict"]) == ["net.0.weight", "net.0.bias", "net.3.weight",
                                                                "net.3.bias"]
    assert_same(a["state_dict"], load(plain.run_dir / "checkpoints" / "last.ckpt")["state_dict"])
    for run in (compiled, uncompiled, compiled_later):
        b = load(run.run_dir / "checkpoints" / "last.ckpt")
        assert b["global_step"] == 24
        assert_same(a["state_dict"], b["state_dict"])


def test_a_compiled_vae_loads_and_exports_as_an_uncompiled_one(tmp_path, monkeypatch, capsys):
    """The smallest zoo model, compiled: its checkpoint loads into an uncompiled model (zoo.load) with the trained
    model's keys and values, and the pretrained export writes those."""
    torch._dynamo.reset()
    counters.clear()
    run = train(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "trainer.max_steps=2", "trainer.limit_val_batches=1",
                 "trainer.num_sanity_val_steps=0", "test_after_fit=false", "logger=[]", EAGER])
    assert graphs_compiled() >= 2  # the encoder's and the decoder's
    assert run.model.encoder._compiled_call_impl is not None and run.model.decoder._compiled_call_impl is not None
    trained = {k: v.detach() for k, v in run.model.state_dict().items()}
    ckpt = run.run_dir / "checkpoints" / "last.ckpt"
    loaded = zoo.load(str(ckpt))
    assert loaded.encoder._compiled_call_impl is None
    assert_same(trained, loaded.state_dict())
    monkeypatch.chdir(tmp_path)
    assert pretrained_main(["export", str(ckpt), "--name", "compiled-vae", "--out", str(tmp_path / "out"),
                            "trainer.limit_test_batches=1"]) == 0
    exported = load_file(tmp_path / "out" / "compiled-vae.safetensors")
    assert set(exported) == set(trained) and all(torch.equal(exported[k], trained[k]) for k in trained)


@pytest.mark.slow
def test_inductor_compiles_the_vae_and_trains_as_the_eager_run(tmp_path):
    """The real backend on the smallest model: code generated and run; a few steps land within float32 round-off
    of the uncompiled run (inductor fuses and reorders sums)."""
    opts = ["recipe=vae_digits", "trainer.max_steps=3", "trainer.limit_val_batches=1", "trainer.num_sanity_val_steps=0",
            "test_after_fit=false", "logger=[]", "trainer.deterministic=true"]
    torch._dynamo.reset()
    counters.clear()
    compiled = train([*opts, f"run_dir={tmp_path}/compiled", "compile=true"])
    assert counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_hit"] >= 1
    plain = train([*opts, f"run_dir={tmp_path}/plain"])
    a, b = (load(r.run_dir / "checkpoints" / "last.ckpt")["state_dict"] for r in (compiled, plain))
    assert list(a) == list(b)
    for key in a:
        assert torch.allclose(a[key], b[key], rtol=1e-4, atol=1e-5), key
