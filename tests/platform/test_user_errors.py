"""User mistakes: one message, exit status 2, no traceback, nothing half-written."""

import subprocess
import sys

import lightning  # noqa: F401  (imported here, not first inside a test: its log handler keeps the real stderr)
import pytest
import torch
from platform_testlib import assert_refused, one_message, run_main, subprocess_env

# no GPU: gpu; a CUDA GPU: mps (Apple's); Apple's GPU: cuda
MISSING_ACCELERATOR = ("mps" if torch.cuda.is_available() else "cuda") if (
    torch.cuda.is_available() or torch.backends.mps.is_available()) else "gpu"


@pytest.mark.parametrize("override, expected", [
    ("model.hiden=3", "unknown key 'hiden'"),  # unknown model key -> closest valid key
    ("trainer.max_epoch=3", "did you mean: max_epochs"),  # unknown trainer argument
    ("modle.hidden=3", "unknown key 'modle'"),  # unknown top-level key
    ("model.lr=fast", "bad value for 'lr'"),  # wrong type
    ("logger=[csv,wandbb]", "unknown logger 'wandbb'"),  # wrong choice
    ("trainer.max_epochs", "malformed override"),  # no '='
    ("ckpt_path=", "gives ckpt_path no value"),  # ckpt_path=$UNSET: OmegaConf's null, and a new run began
    ("model.hidden= ", "gives model.hidden no value"),  # not OmegaConf's "Incompatible value 'None'"
    ("model.name=vea", "unknown model 'vea'"),  # unknown model
    ("model.name=os:getcwd", "is a builtin_function_or_method, not a model"),
    ("model.name=collections:OrderedDict", "class OrderedDict, not a model"),
    ("data.name=os:getcwd", "not a datamodule"),
    ("callbacks=[{name: grad_varience}]", "did you mean: grad_variance"),  # unknown callback
    ("ckpt_path=last", "leave ckpt_path out to start a new run"),  # nothing to resume
    ("trainer.logger=false", "is set by the zoo"),  # reserved trainer key
    ("trainer.limit_train_batches=0", "must be > 0"),  # trained nothing and exited 0
    ("trainer.max_epochs=0", "it would train nothing"),
    ("trainer.max_steps=0", "it would train nothing"),
    ("trainer.devices=4096", "training processes on the CPU"),  # 64 gloo processes on 2 cores hang
    ("trainer.devices=0", "trainer.devices must be >= 1"),  # Lightning's reason alone, no fix
    # an accelerator this machine lacks (on a GPU machine, the gpu case is skipped)
    (f"trainer.accelerator={MISSING_ACCELERATOR}", "Use trainer.accelerator=cpu"),
])
def test_bad_overrides(toy_recipe, tmp_path, capsys, override, expected):
    code, err = run_main([f"recipe={toy_recipe}", f"run_dir={tmp_path}", override], capsys)
    assert code == 2 and expected in err and "Traceback" not in err
    assert one_message(err), err  # one message (its details below it), nothing else
    assert not any(tmp_path.glob("toy/*")), "nothing written for a rejected run"


@pytest.mark.parametrize("model, data, expected", [
    ("maml", "digits", "maml needs a few-shot datamodule"),  # refused before the run folder
    ("maml_rl", "sinusoid", "maml_rl needs the 2-D navigation datamodule"),
    ("sat", "seqgan_text", "needs a captioning datamodule"),  # has a vocabulary too
    ("skipgram", "seqgan_text", "needs a corpus datamodule"),  # a vocabulary but no counts
])
def test_a_model_refuses_a_datamodule_of_another_kind(model, data, expected, tmp_path, capsys):
    recipe = tmp_path / "pair.yaml"
    recipe.write_text(f"model: {{name: {model}}}\ndata: {{name: {data}}}\ntrainer: {{max_epochs: 1}}\n")
    code, err = run_main([f"recipe={recipe}", f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and expected in err and "data.name=" in err and "Traceback" not in err, err
    assert one_message(err) and not (tmp_path / "runs").exists()


def test_unknown_recipe_lists_closest(capsys, tmp_path, monkeypatch):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "vae_digits.yaml").write_text("description: x\n")
    monkeypatch.setenv("ZOO_RECIPES", str(tmp_path / "recipes"))
    code, err = run_main(["recipe=vae_digit"], capsys)
    assert code == 2 and "unknown recipe 'vae_digit'" in err and "vae_digits" in err


def test_yaml_syntax_error_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  name: toymodel:Toy\n  hidden: [1, 2\ndata: {}\n")
    code, err = run_main([f"recipe={bad}"], capsys)
    assert code == 2 and "YAML syntax error" in err and str(bad) in err and "line" in err


def test_a_scalar_recipe_is_no_mapping(tmp_path, capsys):
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")  # the file's shape is named, not "unknown key"
    code, err = run_main([f"recipe={scalar}"], capsys)
    assert_refused(code, err, r"must be a YAML mapping .* its top level is a single value \('just a string'\)",
                   tmp_path / "runs")


def test_a_section_key_given_without_its_section_is_named_with_it(toy_recipe, tmp_path, capsys):
    code, err = run_main([f"recipe={toy_recipe}", "--max_epochs=1"], capsys)
    assert_refused(code, err, r"without dashes and with their section, section\.max_epochs=1", tmp_path / "runs")
    code, err = run_main([f"recipe={toy_recipe}", "max_epochs=1"], capsys)
    assert_refused(code, err, r"unknown key 'max_epochs' .*\(did you mean trainer\.max_epochs=1\?\)", tmp_path / "runs")


def test_recipe_given_twice_is_noted(toy_recipe, tmp_path, capsys):
    other = tmp_path / "other.yaml"
    other.write_text(toy_recipe.read_text())
    code, err = run_main([f"recipe={toy_recipe}", f"recipe={other}", "print_config=true"], capsys)
    assert code == 0 and f"note: recipe given twice; using recipe={other} (the last)" in err, err


def test_missing_recipe_file(capsys):
    code, err = run_main(["recipe=/nope/missing.yaml"], capsys)
    assert code == 2 and "recipe file not found" in err


def test_trainer_setting_refused_inside_lightning_prints_one_line(tmp_path):
    # Lightning logs "GPU available: ..." before it refuses limit_train_batches=1.5: those lines are
    # held back, so stderr holds the one error line (a subprocess: Lightning's handler writes to the
    # real stderr, which capsys does not see)
    proc = subprocess.run([sys.executable, "-m", "zoo.train", "recipe=vae_digits", "trainer.limit_train_batches=1.5",
                           f"run_dir={tmp_path}/runs"], env=subprocess_env(), capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error: invalid trainer settings"), proc.stderr
    assert one_message(proc.stderr) and not (tmp_path / "runs").exists(), proc.stderr  # Lightning's words, settings


def test_exit_status_and_no_traceback_from_the_shell(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "zoo.train", "recipe=definitely_not_a_recipe"],
                          env=subprocess_env(), capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: unknown recipe") and "Traceback" not in proc.stderr


def test_mapping_override_with_a_name_replaces_instead_of_merging():
    from zoo.config import load_config

    cfg = load_config("dvae_digits", ["model.estimator={name: rloo, n: 4}"])
    assert cfg["model"]["estimator"] == {"name": "rloo", "n": 4}
    cfg = load_config("dvae_digits", ["model.estimator.tau=0.7"])  # a dotted key still merges
    assert cfg["model"]["estimator"]["tau"] == 0.7 and cfg["model"]["estimator"]["name"] == "gumbel_softmax"


# ---- issue 13: every option typed and ranged; trainer options typed; nothing written on failure ----
@pytest.mark.parametrize("argv, expected", [
    (["recipe=vae_digits", "model.latent_dim=0"], "'latent_dim' in recipe"),  # a zero size
    (["recipe=vae_digits", "data.batch_size=-3"], "'batch_size' in recipe"),  # a negative size
    (["recipe=dvae_digits", "model.n_classes=1"], "must be >= 2, got 1"),  # below a declared minimum
    (["recipe=sat_shapes_soft", "model.dropout=1.0"], "must be < 1, got 1.0"),  # a probability range
    (["recipe=seqgan_oracle_small", "model.dis_filter_sizes=[2, 0]"], "must be > 0"),  # list elements
    (["recipe=vae_digits", "model.lr=-0.1"], "'lr' in recipe"),  # a negative rate
    (["recipe=vae_digits", "model.lr=.inf"], "must be a finite number"),  # else a NaN loss inside fit
    (["recipe=dvae_digits", "model.estimator.tau=.inf"], "must be a finite number"),  # trained on uniform samples
    (["recipe=dvae_digits", "model.estimator=os:getcwd"], "not a class"),
    (["recipe=dvae_digits", "model.estimator=collections:OrderedDict"], "has no sample() or loss()"),
    (["recipe=vae_digits", "trainer.max_epochs=abc"], "'max_epochs' in recipe"),  # not an int, for Lightning
    (["recipe=vae_digits", "trainer.max_epochs=2.5"], "must be int | None, got 2.5"),
    (["recipe=vae_digits", "trainer.devices=[a]"], "must be list[int] | str | int"),
    (["recipe=vae_digits", "trainer.precision=bf17"], "'precision' in recipe"),
    (["recipe=vae_digits", "callbacks=[{name: grad_variance, every_n_steps: often}]"], "'every_n_steps'"),
    (["recipe=vae_digits", "trainer.devices=1.5"], "must be list[int] | str | int, got 1.5"),
    # trainer ranges Lightning checks only inside fit (a ZeroDivisionError there) or never
    (["recipe=vae_digits", "trainer.accumulate_grad_batches=0"], "'accumulate_grad_batches' in recipe"),
    (["recipe=vae_digits", "trainer.check_val_every_n_epoch=0"], "'check_val_every_n_epoch' in recipe"),
    (["recipe=vae_digits", "trainer.val_check_interval=0"], "must be > 0, got 0"),
    (["recipe=vae_digits", "trainer.log_every_n_steps=-3"], "must be >= 0, got -3"),
    (["recipe=vae_digits", "trainer.gradient_clip_val=-1"], "'gradient_clip_val' in recipe"),
    (["recipe=vae_digits", "trainer.num_sanity_val_steps=-2"], "must be >= -1, got -2"),
    (["recipe=vae_digits", "checkpoint.mode=maximum"], "must be one of [None, 'min', 'max']"),
    (["recipe=vae_digits", "wandb.mode=onlin"], "'mode' in recipe"),
    # callbacks: checked (and constructed once) with the recipe, before data or model
    (["recipe=vae_digits", "callbacks=5"], "'callbacks' in recipe"),
    (["recipe=vae_digits", "callbacks={a: 1}"], "must be a list"),
    (["recipe=vae_digits", "callbacks=[5]"], "callback entry 5"),
    (["recipe=vae_digits", "callbacks=[{name: swa, swa_lrs: -1}]"], "callback 'swa'"),
    # zero sizes, counts and unknown choices, model by model
    (["recipe=dvae_digits", "model.n_latents=0"], "'n_latents' in recipe"),
    (["recipe=vae_digits", "model.arch=cnn"], "must be one of ['mlp', 'conv']"),
    (["recipe=vae_digits", "data.binarize=otsu"], "'binarize' in recipe"),
    (["recipe=sat_shapes_soft", "model.hidden_dim=0"], "'hidden_dim' in recipe"),
    (["recipe=sat_shapes_soft", "data.batch_size=0"], "'batch_size' in recipe"),
    (["recipe=sat_shapes_soft", "model.encoder=vgg"], "'encoder' in recipe"),
    (["recipe=seqgan_oracle_small", "model.gen_hidden_dim=0"], "'gen_hidden_dim' in recipe"),
    (["recipe=seqgan_oracle_small", "data.seq_len=0"], "seq_len"),
    (["recipe=seqgan_oracle_small", "model.eval_samples=0"], "'eval_samples' in recipe"),  # else 0/0 in fit
    (["recipe=seqgan_oracle_small", "model.bleu_refs=0"], "'bleu_refs' in recipe"),
    (["recipe=skipgram_synthetic", "model.dim=0"], "'dim' in recipe"),
    (["recipe=skipgram_synthetic", "data.window=0"], "'window' in recipe"),
    (["recipe=skipgram_synthetic", "model.negative=0"], "'negative' in recipe"),  # refused before the corpus is built
    (["recipe=skipgram_synthetic", "model.analogy_restrict=0"], "'analogy_restrict' in recipe"),
    (["recipe=skipgram_synthetic", "model.objective=softmax"], "'objective' in recipe"),
    (["recipe=skipgram_synthetic", "model.step_cap=-1"], "must be true or false, got -1"),  # OmegaConf: true
    (["recipe=skipgram_synthetic", "data.test_analogies=2"], "must be true or false, got 2"),
    (["recipe=skipgram_synthetic", "data.planted.groups=abc"], "'groups' in data.planted"),
    (["recipe=skipgram_synthetic", "data.planted.function_words=-1"], "must be >= 0, got -1"),
    (["recipe=skipgram_synthetic", "data.planted.forms=27"], "must be <= 26, got 27"),
    (["recipe=skipgram_synthetic", "data.planted.min_len=30"], "min_len <= max_len"),
    (["recipe=skipgram_synthetic", "data.planted.group=3"], "did you mean: groups"),
    (["recipe=ood_digits_ce", "data.batch_size=0"], "'batch_size' in recipe"),
    (["recipe=ood_toy2d", "data.n_train=0"], "'n_train' in recipe"),
    (["recipe=ood_svhn_joint", "data.val_size=0"], "'val_size' in recipe"),
    (["recipe=maml_sinusoid", "model.hidden=0"], "'hidden' in recipe"),  # trained a net with no units
    (["recipe=maml_sinusoid", "data.meta_batch=0"], "'meta_batch' in recipe"),
    (["recipe=maml_nav2d", "model.horizon=0"], "'horizon' in recipe"),  # else a crash in fit
    (["recipe=maml_nav2d", "model.init_std=0"], "'init_std' in recipe"),  # math domain error (log 0)
    (["recipe=maml_omniglot_5w1s", "data.n_way=0"], "'n_way' in recipe"),
    # sections given a single value (a TypeError from dict()), a seed numpy cannot take
    (["recipe=vae_digits", "checkpoint=5"], "'checkpoint' in recipe"),
    (["recipe=vae_digits", "wandb=[1]"], "'wandb' in recipe"),
    (["recipe=vae_digits", "seed=4294967296"], "an integer from 0 to 4294967295"),  # not seed_everything's ValueError
    (["recipe=vae_digits", "trainer.precision=16-true"], "not supported by VAE"),  # NaN losses in float16
    (["recipe=skipgram_synthetic", "trainer.precision=bf16-true"], "not supported by SkipGramModule"),
    (["recipe=skipgram_synthetic", "trainer.precision=16"], "precision=16 is not supported"),  # GradScaler
])
def test_bad_values_exit_2_before_anything_is_built(argv, expected, tmp_path, capsys):
    code, err = run_main([*argv, f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and expected in err and "Traceback" not in err, err
    assert one_message(err), err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("recipe", ["vae_digits", "ood_digits_ce"])
def test_a_batch_larger_than_the_training_set_is_refused(recipe, tmp_path, capsys):
    # the last partial batch is dropped: else an exit 0 "Trainer.fit stopped: No training batches"
    # with a run folder holding only config.yaml
    code, err = run_main([f"recipe={recipe}", "data.batch_size=100000", "trainer.fast_dev_run=true",
                          f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and "data.batch_size=100000 is larger than" in err and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("error: ") and not (tmp_path / "runs").exists()


def test_an_unwritable_run_dir_is_a_user_error(toy_recipe, tmp_path, capsys):
    blocker = tmp_path / "runs"
    blocker.write_text("a file where the run folder should go")
    code, err = run_main([f"recipe={toy_recipe}", f"run_dir={blocker}"], capsys)
    assert code == 2 and "cannot write the run folder" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and blocker.is_file()


def test_a_monitor_lightning_cannot_find_is_a_user_error_and_leaves_no_folder(toy_recipe, tmp_path, capsys):
    # found only once validation has run: the folder made for the run, and runs/toy/, go again
    code, err = run_main([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", "trainer.max_epochs=1",
                          "callbacks=[{name: early_stopping, monitor: val/nope}]"], capsys)
    assert code == 2 and "callback 'early_stopping'" in err and "val/nope" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error: ")
    assert not (tmp_path / "runs").exists(), list((tmp_path / "runs").rglob("*"))


def test_an_accelerator_without_its_package_is_a_user_error(tmp_path, capsys):
    pytest.importorskip("lightning")
    try:
        import torch_xla  # noqa: F401
        pytest.skip("torch_xla is installed here")
    except ImportError:
        pass
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "trainer.accelerator=tpu"], capsys)
    assert code == 2 and "not installed" in err and "torch_xla" in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


def test_recipe_whose_top_level_is_a_list(tmp_path, capsys):
    bad = tmp_path / "list.yaml"
    bad.write_text("- model: vae\n- data: digits\n")
    code, err = run_main([f"recipe={bad}", f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and "must be a YAML mapping" in err and "its top level is a list" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("content, expected", [
    (b"42\n", "its top level is a single value (int)"),
    (bytes(range(128, 256)), "is not a text file"),
])
def test_recipe_that_is_not_a_mapping_of_text(content, expected, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    code, err = run_main([f"recipe={bad}", f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and expected in err and "Traceback" not in err, err
    assert one_message(err) and not (tmp_path / "runs").exists()


def test_a_user_error_during_fit_leaves_no_run_folder(toy_recipe, tmp_path, capsys, monkeypatch):
    import toymodel

    from zoo.errors import UserError

    def refuse(self, stage):
        raise UserError("the toy data refuses (as a missing file would)")

    monkeypatch.setattr(toymodel.ToyData, "setup", refuse)
    code, err = run_main([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and "the toy data refuses" in err
    assert not any((tmp_path / "runs").rglob("*")), "no run folder for a run that never trained"


def test_training_always_ends_with_last_ckpt(toy_recipe, tmp_path, capsys):
    # checkpoints every 5 epochs and 2 epochs of training: only the end-of-training save writes one
    import logging

    class Lines(logging.Handler):
        def __init__(self):
            super().__init__(logging.DEBUG)
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    lines = Lines()
    logging.getLogger("lightning.pytorch").addHandler(lines)
    try:
        code, _ = run_main([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", "trainer.max_epochs=2",
                            "checkpoint.every_n_epochs=5"], capsys)
    finally:
        logging.getLogger("lightning.pytorch").removeHandler(lines)
    assert code == 0
    assert not any("weights_only" in line for line in lines.lines), "the final save is explicit: no log line"
    (last,) = (tmp_path / "runs").glob("*/*/checkpoints/last.ckpt")
    state = torch.load(last, weights_only=True)
    # the save at the end of training, after both epochs (8 steps each) closed: epoch 2, 2 completed (a save
    # by the checkpoint callback at the end of epoch 1 reads epoch 1, 1 completed)
    assert state["epoch"] == 2 and state["global_step"] == 16
    assert state["loops"]["fit_loop"]["epoch_progress"]["current"]["completed"] == 2
    code, err = run_main([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", "trainer.max_epochs=3",
                          "ckpt_path=last"], capsys)
    assert code == 0, err  # the run can be resumed: on from step 16, one more epoch
    assert torch.load(last, weights_only=True)["global_step"] == 24


def test_recipe_inheritance_holds_only_the_differences(tmp_path, capsys):
    from zoo.config import load_config
    from zoo.train import main as train_main

    child = load_config("dvae_digits_rloo")
    base = load_config("dvae_digits")
    assert child["model"]["estimator"] == {"name": "rloo", "n": 4}  # replaced, not merged with tau
    differing = {k for k in base["model"] if base["model"][k] != child["model"][k]}
    assert differing == {"estimator"} and child["data"] == base["data"] and child["trainer"] == base["trainer"]
    assert child["description"] != base["description"]
    # print_config shows the merged result (no 'base' key)
    assert train_main(["recipe=dvae_digits_rloo", "print_config=true"]) == 0
    out = capsys.readouterr().out
    assert "base:" not in out and "kl_warmup_steps: 1000" in out and "name: rloo" in out
    # a base by relative path, a chain, and a cycle
    (tmp_path / "a.yaml").write_text("base: b.yaml\ndescription: a\nseed: 3\n")
    (tmp_path / "b.yaml").write_text("base: dvae_digits\ndescription: b\ntrainer: {max_epochs: 7}\n")
    cfg = load_config(str(tmp_path / "a.yaml"))
    assert cfg["seed"] == 3 and cfg["trainer"]["max_epochs"] == 7 and cfg["model"]["name"] == "dvae"
    (tmp_path / "c.yaml").write_text("base: d.yaml\n")
    (tmp_path / "d.yaml").write_text("base: c.yaml\n")
    code, err = run_main([f"recipe={tmp_path / 'c.yaml'}"], capsys)
    assert code == 2 and "cycle" in err
    code, err = run_main([f"recipe={tmp_path / 'a.yaml'}", "model.estimator=expectation"], capsys)
    assert code == 2 and "Estimators that fit" in err
    # a missing base names the recipe that asked for it and where it was looked for (the folder of
    # that recipe, not the working directory)
    (tmp_path / "e.yaml").write_text("base: ./nope.yaml\n")
    code, err = run_main([f"recipe={tmp_path / 'e.yaml'}"], capsys)
    assert code == 2 and f"in recipe {tmp_path / 'e.yaml'}" in err and str(tmp_path / "nope.yaml") in err, err


def test_out_of_memory_is_one_message_naming_the_request():
    from zoo.errors import out_of_memory

    cpu = RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                       "you tried to allocate 102400000000 bytes. Error code 12 (Cannot allocate memory)")
    assert "95.4 GiB requested" in str(out_of_memory(cpu))
    assert "lower the sizes" in str(out_of_memory(MemoryError()))
    assert out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied")) is None  # a bug stays a bug


def test_a_size_the_machine_cannot_allocate_exits_2_and_writes_nothing(tmp_path, capsys):
    # 2^31 - 1 hidden units (the largest integer option): a hidden x hidden layer of 16 EiB, more than a
    # 47-bit address space, so refused everywhere
    code, err = run_main(["recipe=vae_digits", "model.hidden=2147483647", f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and "out of memory" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_weights_larger_than_the_machine_are_refused_before_they_are_allocated(tmp_path, capsys, monkeypatch):
    """Where the kernel grants any allocation (vm.overcommit_memory=1: the GPU machine), the test above
    ran for minutes filling memory instead of failing: the sizes a model asks for are added up
    against the machine's memory first. Here the machine is made 64 MiB: a 4096-unit VAE (84 MiB of
    weights) is refused with the sum, and one of 400 units trains."""
    from zoo.core import memory

    monkeypatch.setattr(memory, "machine_bytes", lambda: 64 * 2**20)
    code, err = run_main(["recipe=vae_digits", "model.hidden=4096", "trainer.fast_dev_run=true",
                          f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and err.startswith("error: out of memory (0.1 GiB of weights requested") and "0.1 GiB)" in err, err
    assert not (tmp_path / "runs").exists()
    code, err = run_main(["recipe=vae_digits", "model.hidden=400", "trainer.fast_dev_run=true",
                          f"run_dir={tmp_path}/runs"], capsys)
    assert code == 0, err
