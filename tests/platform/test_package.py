"""The zoo as a package: zoo.list_pretrained / zoo.load, the torch.hub entries of hubconf.py, and the wheel
(`pip wheel .`) installed away from the checkout: its recipes, console scripts, a one-epoch recipe, and
zoo.load / zoo.evaluate of a pretrained entry."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import zoo
from zoo.loading import PRETRAINED_DIR

REPO = Path(__file__).resolve().parents[2]
NAMES = sorted(json.loads(p.read_text())["name"] for p in PRETRAINED_DIR.glob("*.json"))


def test_list_pretrained_names_every_card_in_one_line():
    listed = zoo.list_pretrained()
    assert sorted(listed) == NAMES and "vae-digits" in listed
    assert all(isinstance(d, str) and d and "\n" not in d for d in listed.values())


def test_import_zoo_and_list_pretrained_load_no_torch():
    code = "import sys, zoo; zoo.list_pretrained(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"


def test_load_on_a_device():
    model = zoo.load("vae-digits", device="cpu")
    assert model.device.type == "cpu" and not model.training
    assert model.sample(2, seed=0).device.type == "cpu"


def test_hubconf_has_one_entry_per_pretrained_model():
    spec = importlib.util.spec_from_file_location("hubconf_under_test", REPO / "hubconf.py")
    hubconf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hubconf)
    entries = sorted(n for n in dir(hubconf) if callable(getattr(hubconf, n)) and not n.startswith("_"))
    assert entries == sorted(n.replace("-", "_") for n in NAMES)  # what torch.hub.list shows


def test_torch_hub_load_from_the_repository_root(monkeypatch):
    monkeypatch.chdir(REPO)
    model = torch.hub.load(".", "vae_digits", source="local")
    reference = zoo.load("vae-digits")
    assert type(model) is type(reference)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), reference.state_dict().values()))
    assert torch.equal(model.sample(3, seed=1), reference.sample(3, seed=1))
    with pytest.raises(TypeError, match="only device="):
        torch.hub.load(".", "vae_digits", source="local", pretrained=False)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (pytest -m gpu)")
def test_every_inference_method_follows_the_model_to_the_gpu():
    cuda = torch.device("cuda", torch.cuda.current_device())
    images = torch.rand(2, 1, 8, 8)  # cpu inputs: the methods move them
    vae = zoo.load("vae-digits", device="cuda")
    for out in (vae.sample(2, seed=0), vae.encode(images), vae.reconstruct(images), vae.log_likelihood(images, k=5)):
        assert out.device == cuda
    assert torch.allclose(vae.sample(2, seed=0).cpu(), zoo.load("vae-digits").sample(2, seed=0), atol=1e-5)
    ood = zoo.load("ood-digits-joint", device="cuda")
    found = ood.detect(images, "odin")
    assert found.score.device == found.is_in.device == ood.predict_proba(images).device == cuda
    seqgan = zoo.load("seqgan-oracle-small", device="cuda")
    assert seqgan.nll(seqgan.generate(2, seed=0)).device == cuda and seqgan.beam_samples(2, seed=0)[0].device == cuda
    words = zoo.load("skipgram-synthetic", device="cuda")
    assert words.vector("g00b").device == cuda and words.most_similar("g00b", 2)[0][0] == "g00c"
    sat = zoo.load("sat-shapes-hard", device="cuda")
    scenes = torch.rand(1, 3, 64, 64)
    assert sat.caption(scenes, return_attention=True).attention.device == cuda and sat.caption(scenes, sample=2, seed=0)
    maml = zoo.load("maml-sinusoid", device="cuda")
    x = torch.linspace(-4, 4, 10)[:, None]
    assert maml.adapt(x, torch.sin(x), steps=2)(x).device == cuda


def _away_from_the_checkout(site: Path) -> dict:
    """The environment of a process that sees the installed wheel and not this checkout (PYTHONPATH extended
    with the install, minus the checkout's own entry; the venv's packages stay)."""
    keep = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve() != REPO]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *keep]), "OMP_NUM_THREADS": "1"}


@pytest.mark.slow  # costly: `make test-slow` (CI runs it)
def test_the_wheel_carries_recipes_and_commands(tmp_path):
    """Built from a copy of the sources (the build writes build/ and *.egg-info next to them), installed with
    pip --target, and run from a folder outside the checkout."""
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("zoo", "recipes", "benchmarks/common"):  # the benchmarks' helpers: to check they stay out of the wheel
        shutil.copytree(REPO / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, source / name)
    wheels, site, work = tmp_path / "wheels", tmp_path / "site", tmp_path / "work"
    work.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)], check=True,
                   capture_output=True)
    (wheel,) = wheels.glob("stochastic_zoo-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True, capture_output=True)
    assert len(list((site / "zoo" / "recipes").rglob("*.yaml"))) == len(list((REPO / "recipes").rglob("*.yaml")))
    assert not (site / "benchmarks").exists() and not (site / "common").exists()
    env = _away_from_the_checkout(site)

    def run(*args: str) -> str:
        done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    listed = run(sys.executable, "-m", "zoo.train", "--list")
    assert "vae_digits " in listed and "sat_shapes_soft " in listed
    for script in ("zoo-train", "zoo-evaluate", "zoo-predict", "zoo-pretrained", "zoo-estimators", "zoo-sweep"):
        assert (site / "bin" / script).is_file(), script
    assert "--launcher" in run(sys.executable, "-m", "zoo.sweep", "--help")  # the zoo.sweep package is in the wheel
    trained = run(sys.executable, str(site / "bin" / "zoo-train"), "recipe=vae_digits", "trainer.max_epochs=1",
                  "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "trainer.enable_progress_bar=false",
                  f"run_dir={work / 'runs'}")
    assert "test/iwae_nll" in trained and list((work / "runs" / "vae_digits").glob("*/checkpoints/last.ckpt"))
    code = ("import json, zoo, zoo.evaluate as e; m = zoo.load('vae-digits'); "
            "print(json.dumps({'file': zoo.__file__, 'shape': list(m.sample(2, seed=0).shape), "
            "'metrics': e.evaluate('vae-digits')}))")
    out = json.loads(run(sys.executable, "-c", code).splitlines()[-1])
    assert Path(out["file"]).resolve().is_relative_to(site.resolve())  # the installed zoo, not this checkout
    assert out["shape"] == [2, 1, 8, 8]
    card = json.loads((PRETRAINED_DIR / "vae-digits.json").read_text())["metrics"]
    assert abs(out["metrics"]["test/loss"] - card["test/loss"]) < 1e-4
