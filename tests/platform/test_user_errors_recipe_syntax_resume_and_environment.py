"""User mistakes in recipes, overrides, resuming and the environment: weights and spreads no study would
choose (OOD's beta 1e38, a toy class spread of 1e30), SeqGAN counts without an upper bound, images the
captioner would change silently, and recipe files, OmegaConf interpolations, override syntax,
trainer devices and strategies, resuming, checkpoint paths, environment variables. Each mistake is one
message, exit status 2, no traceback, and no run folder left behind."""

import re

import lightning  # noqa: F401  (imported before the tests: its log handler keeps the real stderr)
import pytest
from platform_testlib import assert_refused, one_message, run_main


# ---- values no study would choose ---------------------------------------------------------------------
@pytest.mark.parametrize("recipe, override, expected", [
    # else trained to chance, or the float32 loss overflows into the generic "diverged" message
    ("ood_toy2d", "model.beta=1e38", r"'beta' in recipe .* must be <= 1000.0 \(the KL term would outweigh"),
    ("ood_digits_joint", "model.beta=1001", r"'beta' in recipe .* must be <= 1000.0"),
    # else the classes cover (std) or leave behind (separation) the OOD test sets, without a word
    ("ood_toy2d", "data.std=1e30", r"'std' in recipe .* must be <= 8.0 \(the OOD test sets lie in the box"),
    ("ood_toy2d", "data.separation=1e30", r"'separation' in recipe .* must be <= 8.0"),
    # else out of memory at the first adversarial step, after MLE and D pre-training
    ("seqgan_oracle_small", "model.rollouts=100000000", r"'rollouts' in recipe .* must be <= 1000 \(over 60x"),
    # else samples for days (or runs out of memory) at the end of the first epoch
    ("seqgan_oracle_small", "model.eval_samples=2147483647", r"'eval_samples' in recipe .* must be <= 1000000"),
    ("seqgan_oracle", "model.test_samples=1000001", r"'test_samples' in recipe .* must be <= 1000000 \(100x"),
    # else still generating 10 minutes after the first epoch (5 GB); self-BLEU grows with the square of the samples
    ("seqgan_text", "model.bleu_samples=100000000", r"'bleu_samples' in recipe .* must be <= 10000 \(100x"),
    ("seqgan_text", "model.test_bleu_samples=100000", r"'test_bleu_samples' in recipe .* must be <= 2000 \(10x"),
])
def test_values_no_study_would_choose_are_refused_with_the_config(recipe, override, expected, tmp_path, capsys):
    code, err = run_main([f"recipe={recipe}", f"run_dir={tmp_path}/runs", "print_config=true", override], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_the_new_bounds_keep_the_recipes_and_the_paper_settings():
    from zoo.config import load_config

    for recipe in ("ood_toy2d", "ood_toy2d_boundary", "ood_digits_joint", "ood_cifar10_joint", "seqgan_oracle",
                   "seqgan_oracle_small", "seqgan_text"):
        load_config(recipe, [])
    cfg = load_config("ood_toy2d", ["model.beta=1000", "data.std=8", "data.separation=8"])
    assert cfg["model"]["beta"] == 1000 and cfg["data"]["std"] == 8 and cfg["data"]["separation"] == 8
    assert load_config("ood_cifar10_joint", ["model.beta=0.1"])["model"]["beta"] == 0.1  # the paper's CIFAR-10
    assert load_config("seqgan_text", ["model.bleu_samples=10000", "model.test_bleu_samples=2000"])["model"]["name"]
    cfg = load_config("seqgan_oracle", ["model.rollouts=1000", "model.eval_samples=1000000"])
    assert cfg["model"]["rollouts"] == 1000 and load_config("seqgan_oracle", [])["model"]["rollouts"] == 16


def test_predict_says_when_it_resizes_or_colours_an_image(tmp_path, capsys):
    """A 10x10 or greyscale image is resized / converted with a one-line note on stderr each."""
    from PIL import Image

    from zoo import predict

    Image.new("L", (10, 10), 128).save(tmp_path / "tiny.png")
    Image.new("RGB", (10, 12), (200, 30, 30)).save(tmp_path / "small.png")
    Image.new("L", (64, 64), 128).save(tmp_path / "grey.png")
    Image.new("RGB", (64, 64), (200, 30, 30)).save(tmp_path / "fine.png")
    Image.new("RGB", (300, 200), (200, 30, 30)).save(tmp_path / "large.png")  # scaled down as the training scenes
    names = ["tiny.png", "small.png", "grey.png", "fine.png", "large.png"]
    assert predict.main(["sat-shapes-soft", *(str(tmp_path / n) for n in names), "beam=1"]) == 0
    out = capsys.readouterr()
    assert len(out.out.strip().splitlines()) == 5, out  # still captions every image
    assert out.err.strip().splitlines() == [
        f"note: {tmp_path / 'tiny.png'} is 10x10 greyscale; resized to 64x64 RGB as the model expects "
        "(it sees no colour)",
        f"note: {tmp_path / 'small.png'} is 10x12; resized to 64x64 as the model expects",
        f"note: {tmp_path / 'grey.png'} is 64x64 greyscale; converted to RGB as the model expects (it sees no colour)",
    ], out.err


# ---- recipe files and OmegaConf interpolations ----------------------------------------------------------------
BOMB = "\n".join(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]" for prev, name in zip("abcdefgh", "bcdefghi"))


@pytest.mark.parametrize("text, expected", [
    # OmegaConf 2.4 stops it as a "YAML syntax error ... line 1, column 1"; 2.3 builds every copy
    ("a: &a [x, x, x, x, x, x, x, x, x]\n" + BOMB + "\nmodel: {name: vae}\ndata: {name: digits}\n",
     r"its YAML aliases \(\*name\) expand to [\d,]{11} values, more than the 10,000 a recipe may hold"),
    # not OmegaConf's words only ("Interpolation key 'nowhere.x' not found"), without the key that holds it
    ("model:\n  name: vae\n  latent_dim: ${nowhere.x}\ndata: {name: digits}\n",
     r"cannot resolve model.latent_dim \(\$\{...\} names another key .* by its full.*\n  OmegaConf: Interpolation key "
     r"'nowhere.x' not found"),
    ("model:\n  name: vae\n  latent_dim: ${model.hidden}\n  hidden: ${model.latent_dim}\ndata: {name: digits}\n",
     r"cannot resolve model.latent_dim \(it refers back to itself.*\n  OmegaConf: Recursive interpolation detected"),
    ("model: {name: vae}\ndata:\n  name: digits\n  root: ${oc.env:ZOO_ROUND4_UNSET}\n",
     r"cannot resolve data.root \(set the environment variable .* \$\{oc.env:ZOO_ROUND4_UNSET,.*\n  OmegaConf: "
     r".*'ZOO_ROUND4_UNSET' not found"),
    ("model:\n  name: vae\n  latent_dim: ${foo:bar}\ndata: {name: digits}\n",
     r"cannot resolve model.latent_dim \(the resolvers are oc.env.*\n  OmegaConf: Unsupported interpolation type foo"),
])
def test_broken_recipe_files_name_the_key_and_the_fix(text, expected, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ZOO_ROUND4_UNSET", raising=False)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text)
    code, err = run_main([f"recipe={recipe}", f"run_dir={tmp_path}/runs"], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_alias_expansion_is_counted_without_building_it():
    import yaml

    from zoo.recipe_files import expanded_size

    doc = yaml.compose("a: &a [x, x, x, x, x, x, x, x, x]\n" + BOMB, Loader=yaml.SafeLoader)
    lists = [10]  # a: the list and its 9 values; b..i: a list of 9 copies of the one before
    for _ in range(8):
        lists.append(1 + 9 * lists[-1])
    assert expanded_size(doc) == 1 + 9 + sum(lists) > 10**8  # the mapping, its 9 keys, their lists
    assert expanded_size(yaml.compose("a: 1\nb: [1, 2]\n", Loader=yaml.SafeLoader)) == 7  # map, 2 keys, 1, list, 2


def test_a_recipe_folder_is_not_reported_missing(tmp_path, capsys):
    (tmp_path / "mine.yaml").write_text("model: {name: vae}\ndata: {name: digits}\n")
    code, err = run_main([f"recipe={tmp_path}", f"run_dir={tmp_path}/runs"], capsys)  # not "recipe file not found"
    assert_refused(code, err, f"recipe {tmp_path} is a folder, not a recipe file: give a YAML file \\(e.g. "
                   f"{tmp_path / 'mine.yaml'}\\)", tmp_path / "runs")


# ---- override syntax ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("override, expected", [
    # Hydra's prefixes, not "unknown key '+model' (did you mean: model?)", or "write key=value" for ~
    ("+model.foo=3", r"malformed override '\+model.foo=3': .* without Hydra's '\+', '\+\+' or '~' prefixes: "
                     r"write model.foo=VALUE"),
    ("~model.latent_dim", r"without Hydra's .* write model.latent_dim=VALUE .*model.latent_dim=null unsets"),
    # not "unknown key ''", nor "Value '{'': 3}' of type 'DictConfig' could not be converted to Integer"
    ("model..latent_dim=3", r"the key 'model..latent_dim' has an empty part between its dots"),
    ("model.latent_dim.=3", r"the key 'model.latent_dim.' has an empty part between its dots"),
    # not "malformed override in ['logger=[csv', ...every item...]: while parsing a flow sequence"
    # PyYAML's own words differ between versions ("did not find expected ',' or ']'" / "expected ',' or ']', but got")
    ("logger=[csv", r"malformed override 'logger=\[csv': .*expected ',' or '\]'.* in its value: close every"),
    ("model.estimator={name: rloo", r"malformed override 'model.estimator=\{name: rloo': .*expected ',' or '\}'"),
    ("model.latent_dim=${model.hidden", r"'model.latent_dim=\$\{model.hidden': no viable .* closed by '\}'"),
    # not "needs a 'model:' section with a 'name'"
    ("model=vae", r"'model: vae' in recipe .*: model is a section of options; its name is given as model.name=vae"),
    # two csv loggers would write every row of metrics.csv twice
    ("logger=[csv,tensorboard,csv]", r"logger lists csv more than once .*: list each logger once, e.g. "
                                     r"logger=\[csv,tensorboard\]"),
    ("logger=null", r"unknown logger 'None' .* or none: logger=\[\]"),
])
def test_override_syntax_mistakes_name_the_item_and_the_fix(override, expected, tmp_path, capsys):
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "print_config=true", override], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_an_override_with_dashes_says_to_drop_them(tmp_path, capsys):
    code, err = run_main(["recipe=vae_digits", "--trainer.max_epochs=3", f"run_dir={tmp_path}/runs"], capsys)
    assert_refused(code, err, "overrides are written without dashes, trainer.max_epochs=3", tmp_path / "runs")


def test_a_home_folder_of_no_user_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # else a folder named '~nosuchuser' in the working one
    code, err = run_main(["recipe=vae_digits", "run_dir=~nosuchuser_r4/runs", "print_config=true"], capsys)
    assert_refused(code, err, "~nosuchuser_r4/runs names the home folder of a user 'nosuchuser_r4', and this machine "
                   "has none: write ~/", tmp_path / "~nosuchuser_r4")
    assert not any(tmp_path.iterdir())


def test_a_message_over_several_lines_is_printed_as_one(capsys):
    from zoo.cli import exit_status
    from zoo.errors import UserError

    def fail() -> int:  # Lightning's words for trainer.devices=[0,1] on a machine with one GPU
        raise UserError("invalid trainer settings: You requested gpu: [0, 1]\n But your machine only has: [0]\n")

    assert exit_status(fail) == 2
    assert capsys.readouterr().err == ("error: invalid trainer settings: You requested gpu: [0, 1] "
                                       "But your machine only has: [0]\n")


# ---- trainer settings, before any data is built ---------------------------------------------------------------
@pytest.mark.parametrize("overrides, expected", [
    # else a traceback ("cannot pickle '_thread.RLock' object") once fit starts, and a run folder left behind
    (["trainer.strategy=ddp_spawn"], r"trainer.strategy=ddp_spawn is not supported: .* use trainer.strategy=ddp"),
    # else refused by Lightning only after the corpus is generated and cached under data.root
    (["trainer.strategy=dpp"], r"invalid trainer settings: .*invalid strategy name"),
    # not Lightning's reason only ("should be an int > 0"), after the corpus
    # (on the CPU, named: with a GPU present, auto picks it and the next test covers that)
    (["trainer.accelerator=cpu", "trainer.devices=[0,1]"],
     r"selected with `CPUAccelerator` .* trainer.devices is a number of processes"),
    # on a 1-GPU machine Lightning says it over two lines (two 'error' lines); everywhere else it is one of
    # "no GPU" / "only has [0]" / "selected with CPUAccelerator", each one line with a fix
    (["trainer.devices=[0,99]"], r"invalid trainer settings: .*(use|trainer.devices)"),
    # else the run stops as it starts and exits 0
    (["trainer.max_time=00:00:00:00"], r"trainer.max_time=00:00:00:00 would train nothing"),
])
def test_trainer_settings_are_refused_before_any_data_is_built(overrides, expected, tmp_path, capsys):
    code, err = run_main(["recipe=skipgram_synthetic", f"run_dir={tmp_path}/runs", f"data.root={tmp_path}/data",
                          *overrides], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")
    assert not (tmp_path / "data").exists(), "no corpus generated for a refused run"


def test_evaluate_refuses_a_spawn_strategy(capsys):
    from zoo import evaluate

    assert evaluate.main(["vae-digits", "trainer.strategy=ddp_spawn"]) == 2  # not a pickling traceback
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [err.strip()] and "trainer.strategy=ddp_spawn is not supported" in err, err


# ---- resuming ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vae_checkpoint(tmp_path_factory):
    """A vae_digits run of 3 steps (1 epoch started)."""
    from zoo.train import train

    root = tmp_path_factory.mktemp("base")
    train(["recipe=vae_digits", f"run_dir={root}", "trainer.max_steps=3", "test_after_fit=false",
           "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false"])
    return next(root.glob("vae_digits/*/checkpoints/last.ckpt"))


@pytest.mark.parametrize("overrides, expected", [
    # else Lightning stops at once ("max_steps=2 reached"), exits 0, and leaves a run folder of logs only
    (["trainer.max_steps=2"], r"(?s)has trained 1 epoch\(s\), 3 step\(s\): trainer.max_steps=2 leaves nothing more "
                              r"to train. Raise trainer.max_steps .*\n  python -m zoo.evaluate"),
    (["trainer.max_epochs=1"], r"trainer.max_epochs=1 leaves nothing more to train"),
])
def test_resuming_a_run_with_nothing_left_to_train_is_refused(overrides, expected, vae_checkpoint, tmp_path, capsys):
    code, err = run_main(["recipe=vae_digits", f"ckpt_path={vae_checkpoint}", f"run_dir={tmp_path}/runs", *overrides],
                         capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_a_checkpoint_of_another_model_is_refused_before_the_data(vae_checkpoint, tmp_path, capsys):
    # before skip-gram's corpus is generated and cached
    code, err = run_main(["recipe=skipgram_synthetic", f"ckpt_path={vae_checkpoint}", f"run_dir={tmp_path}/runs",
                          f"data.root={tmp_path}/data"], capsys)
    assert_refused(code, err, "is a 'vae' model, but the recipe trains 'skipgram'", tmp_path / "runs")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("value, expected", [
    ("best", r"ckpt_path=best: no such checkpoint file; ckpt_path takes 'last' .* or the path of a .ckpt file$"),
    ("vae-digits", r"ckpt_path=vae-digits: .*\(vae-digits is a pretrained entry: use it with python -m zoo.evaluate"),
])
def test_a_ckpt_path_that_is_a_word_says_what_ckpt_path_takes(value, expected, tmp_path, capsys):
    code, err = run_main(["recipe=vae_digits", f"ckpt_path={value}", f"run_dir={tmp_path}/runs"], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


# ---- W&B and the environment ---------------------------------------------------------------------------------
@pytest.mark.parametrize("override, expected", [
    # not wandb's UsageError / pydantic ValidationError tracebacks once fit starts, after the run folder
    ("wandb.project=my/project", r"wandb.project='my/project' contains /: W&B takes 1 to 128 characters, none of"),
    ("wandb.tags=[" + "x" * 65 + "]", r"wandb.tags holds 'xxxxxxxxxxxxxxxxxxxx...' of 65 characters: W&B takes tags "
                                      r"of 1 to 64"),
])
def test_wandb_names_it_refuses_are_refused_with_the_config(override, expected, tmp_path, capsys):
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "logger=[csv,wandb]", "wandb.mode=offline",
                          "print_config=true", override], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_wandb_tags_that_are_numbers_become_strings():
    from zoo.config import load_config

    assert load_config("vae_digits", ["wandb.tags=[1,2]"])["wandb"]["tags"] == ["1", "2"]  # not a pydantic traceback


def test_a_wandb_mode_from_the_environment_is_checked(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "bogus")  # not a pydantic traceback once fit starts
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "logger=[wandb]", "print_config=true"],
                         capsys)
    assert_refused(code, err, "the environment variable WANDB_MODE='bogus' is not a W&B mode: unset it", tmp_path)
    assert run_main(["recipe=vae_digits", "logger=[wandb]", "wandb.mode=offline", "print_config=true"], capsys)[0] == 0


def test_a_world_size_that_is_no_number_is_one_message(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "r4")
    monkeypatch.setenv("WORLD_SIZE", "two")  # not int('two')'s ValueError traceback
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs"], capsys)
    assert_refused(code, err, "the environment variable WORLD_SIZE='two' .* must be a whole number", tmp_path / "runs")


def test_torchrun_without_matching_trainer_devices_is_one_message(tmp_path, capsys, monkeypatch):
    """torchrun --nproc_per_node=2 without trainer.devices=2: each process would train alone, both into one folder."""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "r5")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs"], capsys)
    assert_refused(code, err, r"torchrun started 2 processes, but trainer.devices=auto x trainer.num_nodes=1 does not "
                              r"make 2: .* Give trainer.devices=2 trainer.num_nodes=1", tmp_path / "runs")
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "trainer.devices=1"], capsys)
    assert_refused(code, err, r"trainer.devices=1 x trainer.num_nodes=1 does not make 2", tmp_path / "runs")


# ---- images given to zoo.predict -----------------------------------------------------------------------------
def test_predict_refuses_a_truncated_or_huge_image_and_an_output_over_its_input(tmp_path, capsys, monkeypatch):
    import numpy as np
    from PIL import Image

    from zoo import predict

    pixels = (np.random.default_rng(0).random((64, 64, 3)) * 255).astype("uint8")
    Image.fromarray(pixels).save(tmp_path / "full.png")
    data = (tmp_path / "full.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    # not a traceback for the cut-short file
    cases = [(["sat-shapes-soft", "cut.png"], r"cut.png is not a readable image: .*\n  .*\n  error: image file is "
                                              r"truncated"),
             (["sat-shapes-soft", "full.png"], "full.png is too large to read: 4096 pixels, over PIL's limit of 2000"),
             (["vae-digits", "full.png"], "full.png is too large to read: 4096 pixels, over PIL's limit of 2000"),
             (["ood-digits-ce", "full.png"], "full.png is too large to read: 4096 pixels, over PIL's limit of 2000")]
    for argv, expected in cases:
        if "full" in argv[1]:  # PIL refuses more than twice its limit; 64x64 is more than twice 1000 pixels
            monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
        assert predict.main([argv[0], str(tmp_path / argv[1])]) == 2
        out = capsys.readouterr()
        assert one_message(out.err) and re.search(expected, out.err) and not out.out, out
    monkeypatch.undo()
    before = (tmp_path / "full.png").read_bytes()
    for argv in (["sat-shapes-soft", "full.png", "overlay=OUT"], ["vae-digits", "full.png", "out=OUT"]):
        # else the attention figure / the reconstruction grid replaces the input image, exit 0
        option = argv[2].split("=")[0]
        assert predict.main([argv[0], str(tmp_path / argv[1]), argv[2].replace("OUT", str(tmp_path / "full.png"))]) == 2
        out = capsys.readouterr()
        assert f"{option}={tmp_path / 'full.png'} is one of the input files" in out.err and not out.out, out
    assert (tmp_path / "full.png").read_bytes() == before and not (tmp_path / "full_recon.png").exists()


# ---- names in the wrong letter case -------------------------------------------------------------------------
def test_a_name_in_the_wrong_case_gets_the_right_one_suggested(tmp_path, capsys):
    """``zoo.load("VAE-DIGITS")`` and ``recipe=VAE_DIGITS`` get the right name suggested: difflib compares case too."""
    import zoo
    from zoo.errors import UserError

    with pytest.raises(UserError, match=r"unknown pretrained model 'VAE-DIGITS' \(did you mean: vae-digits"):
        zoo.load("VAE-DIGITS")
    code, err = run_main(["recipe=VAE_DIGITS", f"run_dir={tmp_path}/runs"], capsys)
    assert_refused(code, err, r"\(did you mean: vae_digits", tmp_path / "runs")
