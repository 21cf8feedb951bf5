"""The Hugging Face Hub (zoo.hf_hub), all local: ``save_pretrained`` / ``from_pretrained`` round trips of every
released model, ``zoo.load("hf://owner/repo")`` from a pre-filled huggingface_hub cache under
``HF_HUB_OFFLINE=1``, ``push_to_hub`` against a stand-in ``HfApi``, and the folder's checks (hash, foreign
config, nothing cached) as one UserError each."""

import json
import shutil
import sys

import pytest
import torch
import yaml

import zoo
from zoo.core.module import ZooModule
from zoo.errors import UserError
from zoo.loading import pretrained_cards


@pytest.fixture
def huggingface_hub():
    """The hub extra (in dev, so CI has it); where it is missing, test_without_huggingface_hub_... checks the
    message instead."""
    return pytest.importorskip("huggingface_hub")


def test_without_huggingface_hub_saving_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # `import huggingface_hub` raises ImportError
    with pytest.raises(UserError, match=r"pip install 'stochastic-zoo\[hub\]'"):
        zoo.load("maml-sinusoid").save_pretrained(tmp_path / "m")
    assert not (tmp_path / "m").exists()  # refused before anything was written


def scene():
    from zoo.models.captioning.shapes import generate_split

    return generate_split(1, seed=5, split="test").images[0].transpose(1, 2, 0)  # (64, 64, 3)


def digits():
    return torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(0))


PREDICT = {  # model -> a prediction through its inference API (docs/api.md), deterministic given its seed
    "vae": lambda m: m.sample(4, seed=0), "dvae": lambda m: m.sample(4, seed=0),
    "sat": lambda m: m.caption([scene()], beam=2),
    "seqgan": lambda m: m.generate(3, seed=0),
    "skipgram": lambda m: m.most_similar(m.vocabulary[0], topn=3),
    "ood": lambda m: m.predict_proba(digits()),
    "maml": lambda m: m.adapt(torch.linspace(-4, 4, 5)[:, None], torch.sin(torch.linspace(-4, 4, 5))[:, None],
                              steps=2)(torch.zeros(2, 1)),
}


def same(a, b) -> bool:
    """Equal to the bit (a threshold not yet fitted is NaN in both)."""
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())
    return a == b


@pytest.mark.parametrize("name", sorted(pretrained_cards()))
def test_a_save_load_round_trip_keeps_weights_and_predictions(name, tmp_path, huggingface_hub):
    model = zoo.load(name)
    folder = model.save_pretrained(tmp_path / name)
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    for loaded in (ZooModule.from_pretrained(folder), zoo.load(str(folder))):
        assert type(loaded) is type(model) and not loaded.training
        theirs = loaded.state_dict()
        assert theirs.keys() == model.state_dict().keys()
        assert all(same(v, theirs[k]) for k, v in model.state_dict().items())
        predict = PREDICT[loaded.run_info["model"]]
        assert same(predict(model), predict(loaded)), name


def test_the_model_card_carries_the_metrics_as_evaluation_results(tmp_path, huggingface_hub):
    model = zoo.load("vae-digits")
    folder = model.save_pretrained(tmp_path / "m")
    text = (folder / "README.md").read_text()
    meta = yaml.safe_load(text.split("---")[1])
    assert meta["library_name"] == "stochastic-zoo" and "vae" in meta["tags"]
    results = meta["model-index"][0]["results"]
    card = pretrained_cards()["vae-digits"]
    found = {m["name"]: m["value"] for r in results for m in r["metrics"]}
    assert found == pytest.approx(card["metrics"]) and results[0]["dataset"]["split"] == "test"
    assert {r["task"]["type"] for r in results} == {"unconditional-image-generation"}  # the vae spec's Hub task
    assert huggingface_hub.ModelCard.load(folder / "README.md").data.eval_results  # the Hub's parser reads it
    config = json.loads((folder / "config.json").read_text())
    assert config["zoo_format"] == 1 and config["command"] == card["command"]


def test_each_models_hub_task_is_its_specs():
    """The Hub task a model card names is in the model's own spec (its folder's config.py), not in a table of
    every model here; a model of a user's own is "other"."""
    from zoo import hf_hub
    from zoo.registry import MODELS

    assert not hasattr(hf_hub, "TASKS")
    tasks = {name: hf_hub.hub_task(name) for name in MODELS.declared()}
    assert tasks == {name: MODELS.spec(name).task for name in MODELS.declared()}
    assert tasks["sat"] == "image-to-text" and tasks["seqgan"] == "text-generation" and tasks["maml"] == "other"
    assert hf_hub.hub_task("toymodel:Toy") == "other"


def test_a_folder_with_a_wrong_hash_or_a_foreign_config_is_one_user_error(tmp_path, huggingface_hub):
    folder = zoo.load("maml-sinusoid").save_pretrained(tmp_path / "m")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "sha256": "0" * 64}))
    with pytest.raises(UserError, match="sha256 .* does not match"):
        ZooModule.from_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
    for load in (ZooModule.from_pretrained, zoo.load):
        with pytest.raises(UserError, match=r"is not a zoo model: its config.json has no zoo_format \(it is a bert"):
            load(str(folder))
    (folder / "config.json").write_text(json.dumps(config))
    from zoo.models.vae.module import LatentVAE

    with pytest.raises(UserError, match="holds a 'maml' model"):
        LatentVAE.from_pretrained(folder)


def fill_cache(cache, repo: str, folder) -> None:
    """huggingface_hub's cache layout, as a download leaves it: refs/main names a snapshot holding the files."""
    commit = "a" * 40
    base = cache / f"models--{repo.replace('/', '--')}"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(commit)
    shutil.copytree(folder, base / "snapshots" / commit)


@pytest.fixture
def offline_hub(tmp_path, monkeypatch, huggingface_hub):
    """HF_HUB_OFFLINE=1 with an empty cache in tmp_path (huggingface_hub reads both when imported)."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_hf_repo_loads_from_the_cache_offline(tmp_path, offline_hub):
    model = zoo.load("vae-digits")
    fill_cache(offline_hub, "someone/vae-digits", model.save_pretrained(tmp_path / "saved"))
    loaded = zoo.load("hf://someone/vae-digits")
    assert torch.equal(loaded.sample(4, seed=0), model.sample(4, seed=0))
    assert ZooModule.from_pretrained("someone/vae-digits").run_info["card"]["name"] == "vae-digits"


def test_hf_offline_with_nothing_cached_is_one_error_naming_the_repo(offline_hub, capsys):
    with pytest.raises(UserError, match=r"hf://nobody/nothing: HF_HUB_OFFLINE=1 is set .* not in the cache"):
        zoo.load("hf://nobody/nothing")
    from zoo.evaluate import main

    assert main(["hf://nobody/nothing"]) == 2  # the commands take hf:// too: one message, exit status 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()  # the error, then the cache's folder as a detail
    assert "hf://nobody/nothing" in lines[0] and lines[1:] == [f"  cache: {offline_hub}"], err
    assert "Traceback" not in err
    with pytest.raises(UserError, match="owner/name"):
        zoo.load("hf://just-a-name")


def test_push_to_hub_uploads_the_saved_folder(monkeypatch, huggingface_hub):
    uploaded = {}

    class FakeApi:  # the HfApi calls push_to_hub makes, recorded instead of sent
        def __init__(self, token=None):
            uploaded["token"] = token

        def create_repo(self, repo_id, private=None, exist_ok=False):
            uploaded["repo"], uploaded["exist_ok"] = repo_id, exist_ok

        def upload_folder(self, repo_id, folder_path, commit_message):
            uploaded["files"] = {p.name: p.read_bytes() for p in __import__("pathlib").Path(folder_path).iterdir()}
            return f"https://huggingface.co/{repo_id}/commit/1"

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    url = zoo.load("maml-sinusoid").push_to_hub("me/maml", token="t")
    assert url.endswith("me/maml/commit/1") and uploaded["repo"] == "me/maml" and uploaded["exist_ok"]
    assert sorted(uploaded["files"]) == ["README.md", "config.json", "model.safetensors"]
    assert json.loads(uploaded["files"]["config.json"])["name"] == "maml"
    assert b"zoo.load(\"hf://me/maml\")" in uploaded["files"]["README.md"]
