"""User mistakes with data files and data options: a malformed Karpathy split
file, a captioning vocabulary changed by a data option, an empty skip-gram corpus, SeqGAN filters
wider than the sequences, an oracle .npz with NaN / inf, a skip-gram corpus that is binary or a
damaged archive. One message naming the file or key and the fix, exit status 2, no traceback, and
nothing left on disk (no run folder, no data cache)."""

import dataclasses
import json
import sys
import warnings
from pathlib import Path

import lightning  # noqa: F401  (imported here, not first inside a test: its log handler keeps the real stderr)
import numpy as np
import pytest
from platform_testlib import one_message, run_main

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "captioning"))
from tiny_karpathy import write_tiny_karpathy  # noqa: E402


def one_user_error(code: int, err: str, tmp_path: Path) -> None:
    assert code == 2 and "Traceback" not in err and one_message(err), err
    assert not (tmp_path / "runs").exists()


# ---- 1. Karpathy split file with the wrong structure ------------------------------------------------

def images_a_dict(d: dict) -> None:
    d["images"] = {str(i): im for i, im in enumerate(d["images"])}


def entry_a_string(d: dict) -> None:
    d["images"][2] = "2_img.png"


def entry_without_filename(d: dict) -> None:
    del d["images"][2]["filename"]


def sentence_without_tokens(d: dict) -> None:
    del d["images"][2]["sentences"][1]["tokens"]


@pytest.mark.parametrize("spoil, expected", [
    (images_a_dict, "'images' is a dict, not a list"),
    (entry_a_string, "images[2] is a str, not an object"),
    (entry_without_filename, "images[2] has no 'filename'"),
    (sentence_without_tokens, "images[2] (2_img.png) sentences[1] has no 'tokens' list of words"),
])
def test_karpathy_split_file_with_a_wrong_structure(spoil, expected, tmp_path, capsys):
    json_path, images = write_tiny_karpathy(tmp_path / "flickr8k")
    d = json.loads(json_path.read_text())
    spoil(d)
    json_path.write_text(json.dumps(d))
    code, err = run_main(["recipe=sat_flickr8k", f"data.json={json_path}", f"data.image_dir={images}",
                          "model.encoder=cnn", "model.pretrained_encoder=false", "data.num_workers=0",
                          "data.min_freq=1", "trainer.fast_dev_run=true", f"run_dir={tmp_path}/runs"], capsys)
    one_user_error(code, err, tmp_path)
    assert f"the caption file is not a Karpathy split file: {expected}" in err and f"\n  file: {json_path}\n" in err
    assert "images': [{'filename', 'filepath' (optional), 'split', 'sentences': [{'tokens'" in err
    assert "caption_datasets.zip" in err


# ---- 2. captioning vocabulary changed by a data option (named min_freq / limit_images for shapes) --

def test_evaluate_with_a_data_option_that_changes_the_shapes_vocabulary(capsys):
    from zoo import evaluate

    # the shapes scenes (so the words' counts and ids) depend on the image size, not on n_test
    code = evaluate.main(["sat-shapes-soft", "data.image_size=32", "data.n_test=10", "data.n_val=10"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and one_message(err), err
    assert "vocabulary is not the one the model was trained with" in err and "\n  12 words have other ids" in err
    assert "'circle' is 7 here and 10 in the model" in err
    assert "data.n_train, data.seed, data.image_size and data.max_objects decide (n_val and n_test do not)" in err
    assert "data.image_size=32 here, 64 for the model" in err
    assert "min_freq" not in err and "limit_images" not in err


def test_vocabulary_message_names_the_words_and_only_options_the_datamodule_has():
    from zoo.models.captioning.config import KarpathyConfig, ShapesConfig
    from zoo.models.captioning.vocab import VOCAB_OPTIONS, vocab_difference, vocab_fix

    for kind, config in (("shapes", ShapesConfig), ("karpathy", KarpathyConfig)):
        assert set(VOCAB_OPTIONS[kind][1]) <= {f.name for f in dataclasses.fields(config)}
    said = vocab_difference(["a", "b", "c", "d"], ["a", "c", "x", "b"])
    assert "1 of the model's words are not in the data's ('d')" in said
    assert "1 of the data's words are not in the model's ('x')" in said
    assert "'c' is 1 here and 2 in the model" in said and "'b' is 3 here and 1 in the model" in said
    fix = vocab_fix({"dataset": "flickr8k", "image_size": 224}, {"dataset": "coco", "image_size": 224})
    assert "data.json, data.min_freq, data.limit_images and data.restval_as_train" in fix
    assert "the model was trained on flickr8k, this data is coco" in fix and "n_train" not in fix
    assert "data options the model was trained with" in vocab_fix({"dataset": "x"}, {"dataset": "mine"})


# ---- 3. empty skip-gram corpus (left <root>/skipgram_cache/<key>.tmp<pid>/ behind) ---------------

def test_empty_skipgram_corpus_leaves_no_cache_folder(tmp_path, capsys):
    (tmp_path / "empty.txt").write_bytes(b"")
    code, err = run_main(["recipe=skipgram_lee", f"run_dir={tmp_path}/runs", f"data.root={tmp_path}/sg",
                          f"data.files={tmp_path}/empty.txt", "trainer.fast_dev_run=true"], capsys)
    one_user_error(code, err, tmp_path)
    assert "no word occurs min_count=5 times in" in err and "lower data.min_count" in err
    assert not (tmp_path / "sg").exists()


@pytest.mark.parametrize("name, expected", [
    ("weights.bin", "is not UTF-8 text"),  # else a vocabulary of made-up "words"
    ("cut.txt.gz", "is gzip-compressed but cannot be read to its end"),  # else read as its compressed bytes
])
def test_a_corpus_that_is_not_text_is_refused_before_training(name, expected, tmp_path, capsys):
    import gzip

    data = np.random.default_rng(0).integers(0, 256, 20_000, dtype=np.uint8).tobytes()
    if name.endswith(".gz"):
        whole = gzip.compress(" ".join(f"w{i}" for i in data).encode())
        data = whole[:len(whole) // 2]  # a download stopped half way
    (tmp_path / name).write_bytes(data)
    code, err = run_main(["recipe=skipgram_lee", f"run_dir={tmp_path}/runs", f"data.root={tmp_path}/sg",
                          f"data.files={tmp_path}/{name}", "trainer.fast_dev_run=true"], capsys)
    one_user_error(code, err, tmp_path)
    assert expected in err and name in err, err
    assert not (tmp_path / "sg").exists()


def test_a_failure_while_encoding_the_corpus_removes_the_temporary_folder(tmp_path, monkeypatch):
    from zoo.models.skipgram import corpus as C

    (tmp_path / "text.txt").write_text("the cat sat on the mat\n" * 10)

    def fail(tmp, *args):
        (tmp / "ids.bin").write_bytes(b"half")
        raise OSError("No space left on device")

    monkeypatch.setattr(C, "_encode_corpus", fail)
    with pytest.raises(OSError, match="No space left"):
        C.build_corpus([tmp_path / "text.txt"], tmp_path / "data" / "skipgram_cache", min_count=1)
    assert not (tmp_path / "data").exists()  # the folders it made, removed again
    (tmp_path / "data" / "mine").mkdir(parents=True)  # a folder of the user's own stays
    with pytest.raises(OSError):
        C.build_corpus([tmp_path / "text.txt"], tmp_path / "data" / "skipgram_cache", min_count=1)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["mine"]


# ---- 4. SeqGAN filters wider than the sequences (wrong key names; left the samples cache) --------

@pytest.mark.parametrize("overrides, seq_len", [
    (["recipe=seqgan_oracle_small", "data.seq_len=5", "data.vocab_size=20", "data.num_train=64",
      "data.num_val=8", "data.num_test=8"], 5),
    (["recipe=seqgan_text", "data.max_len=5", "data.num_generated=200"], 5),
])
def test_seqgan_filters_wider_than_the_sequences(overrides, seq_len, tmp_path, capsys):
    code, err = run_main([*overrides, f"data.root={tmp_path}/data", f"run_dir={tmp_path}/runs"], capsys)
    one_user_error(code, err, tmp_path)
    assert f"filter width 20 exceeds the sequence length {seq_len}" in err
    assert "model.dis_filter_sizes" in err and "model.dis_num_filters" in err and "d_filter" not in err
    assert "model.dis_filter_sizes=[1,2,3,4,5] model.dis_num_filters=[25,50,50,50,50]" in err
    assert not (tmp_path / "data").exists()  # no seqgan_oracle/samples-*.pt


def test_seqgan_oracle_samples_are_cached_once_a_loader_is_asked_for(tmp_path):
    from zoo.models.seqgan.data import OracleData

    dm = OracleData({"root": str(tmp_path), "vocab_size": 20, "emb_dim": 4, "hidden_dim": 4, "seq_len": 6,
                     "num_train": 64, "num_val": 8, "num_test": 8, "batch_size": 16})
    dm.setup("fit")
    assert not (tmp_path / "seqgan_oracle").exists()
    dm.train_dataloader()
    assert len(list((tmp_path / "seqgan_oracle").glob("samples-*.pt"))) == 1
    again = OracleData(dataclasses.asdict(dm.cfg))
    again.setup("fit")  # read from the cache: nothing left to write
    assert again._unsaved is None and bool((again.train_set.seqs == dm.train_set.seqs).all())


# ---- 5. oracle .npz with NaN / inf parameters (else trained on) ----------------------------------

@pytest.mark.parametrize("key, value", [("W_f", np.nan), ("b_out", np.inf), ("embedding", 1e39)])
def test_oracle_parameters_that_are_not_finite(key, value, tmp_path, capsys):
    from zoo.models.seqgan.oracle import random_oracle_params

    params = {k: v.astype(np.float64) for k, v in random_oracle_params(0, 20, 4, 4).items()}
    params[key].flat[3] = value  # 1e39: finite as float64, inf once read as float32
    np.savez(tmp_path / "oracle.npz", **params)
    with warnings.catch_warnings():  # numpy's overflow warning would be a second message on stderr
        warnings.simplefilter("error", RuntimeWarning)
        code, err = run_main(["recipe=seqgan_oracle_small", f"data.oracle_params={tmp_path / 'oracle.npz'}",
                              f"data.root={tmp_path}/data", "trainer.fast_dev_run=true", f"run_dir={tmp_path}/runs"],
                             capsys)
    one_user_error(code, err, tmp_path)
    assert f"the oracle file's '{key}' holds 1 non-finite value(s)" in err
    assert f"\n  file: {tmp_path / 'oracle.npz'}" in err
    assert "must be finite numbers" in err and "data.oracle_params unset" in err
    assert not (tmp_path / "data").exists()
