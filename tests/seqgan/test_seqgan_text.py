"""Text data (a tiny file in the real format: one sentence per line), BLEU / self-BLEU, and
`python -m zoo.predict` printing generated sequences."""

import gzip
import math

import pytest
import torch
from torchmetrics.functional.text import bleu_score

from zoo.errors import UserError
from zoo.models.seqgan.config import TextDataConfig
from zoo.models.seqgan.data import TextData, decode, grammar_sentences, read_lines
from zoo.models.seqgan.evaluation import bleu, bleu_orders, self_bleu
from zoo.schema import validate

LINES = [
    "The cat sat on the mat .",
    "A dog ran in the park .",
    "the cat ran .",
    "",
    "a   bird sang in the tree .",
    "The dog sat on the log .",
    "zebra !",
] * 6


def write_corpus(tmp_path, lines=LINES):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_text_datamodule_on_a_tiny_file(tmp_path):
    path = write_corpus(tmp_path)
    dm = TextData(
        {
            "path": str(path),
            "max_len": 6,
            "batch_size": 4,
            "min_frequency": 2,
            "val_fraction": 0.2,
            "test_fraction": 0.2,
        }
    )
    dm.setup("fit")
    info = dm.info()
    vocab = info["vocab"]
    assert vocab[:4] == ["[PAD]", "[UNK]", "[BOS]", "[EOS]"] and info["start_token"] == 2
    assert "The" not in vocab and "the" in vocab  # lower-cased
    n = len(dm.train_set) + len(dm.val_set) + len(dm.test_set)
    assert n == 36 and len(dm.val_set) == len(dm.test_set) == 7  # blank lines dropped, 20% / 20%
    ids = dm.encode(["the cat sat on the mat ."])[0].tolist()  # 7 words, max_len 6: 5 words + [EOS]
    assert ids[-1] == 3 and ids[:5] == [vocab.index(w) for w in "the cat sat on the".split()]
    short = dm.encode(["the qwerty ."])[0].tolist()  # unseen word -> [UNK], then [EOS], [PAD]...
    assert short == [vocab.index("the"), 1, vocab.index("."), 3, 0, 0]
    assert decode(torch.tensor([short]), vocab, (3, 0)) == [["the", "[UNK]", "."]]
    batch = next(iter(dm.train_dataloader()))
    assert batch.shape == (4, 6) and batch.dtype == torch.long


def test_text_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        TextData({"path": str(tmp_path / "missing.txt")}).setup("fit")
    with pytest.raises(UserError, match="too few"):
        TextData({"path": str(write_corpus(tmp_path, LINES[:5])), "batch_size": 64}).setup("fit")
    with pytest.raises(UserError, match="every word would be \\[UNK\\]"):  # trained on special tokens alone
        TextData({"path": str(write_corpus(tmp_path, LINES)), "batch_size": 4, "min_frequency": 100000}).setup("fit")
    # the options' rules, checked once by the recipe's check (zoo.config; a datamodule takes its options as given)
    with pytest.raises(UserError, match=r"'max_len' in here must be >= 2 \(a word and \[EOS\]\), got 1"):
        validate(TextDataConfig, {"max_len": 1}, "here")
    with pytest.raises(UserError, match=r"val_fraction \+ test_fraction must be below 1"):
        validate(TextDataConfig, {"val_fraction": 0.5, "test_fraction": 0.5}, "here")


def test_grammar_corpus_is_seeded():
    a, b = grammar_sentences(50, 0), grammar_sentences(50, 0)
    assert a == b and a != grammar_sentences(50, 1)
    assert all(s.endswith(" .") for s in a)


def test_bleu_and_self_bleu():
    sents = grammar_sentences(60, 3)
    refs, samples = sents[:40], sents[40:]
    # our BLEU-2/4 read from one metric equal torchmetrics' own BLEU-2/4
    got = bleu_orders(samples, [refs] * len(samples), (2, 4))
    assert got[2] == pytest.approx(bleu_score(samples, [refs] * 20, n_gram=2).item(), abs=1e-6)
    assert got[4] == pytest.approx(bleu_score(samples, [refs] * 20, n_gram=4).item(), abs=1e-6)
    assert bleu(refs, refs)[4] == pytest.approx(1.0)  # every sample is among the references
    assert bleu(["zebra zebra zebra zebra"], refs)[2] == 0.0
    assert self_bleu(["the cat runs ."] * 5)[4] == pytest.approx(1.0)  # mode collapse: 1
    assert 0 < self_bleu(samples)[2] < 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bleu_and_self_bleu_equal_torchmetrics_counting_every_reference_for_every_sample(seed):
    """BLEU and self-BLEU count each n-gram's largest reference count once; torchmetrics' BLEUScore counts
    the references again for each sample. Random sentences over 4 words, 1-7 long (repeated n-grams within
    a sentence, repeated sentences, ties in the closest reference length), must give its numbers to 1e-9."""
    import random

    rng = random.Random(seed)
    sents = [" ".join(rng.choice("a b c d".split()) for _ in range(rng.randint(1, 7))) for _ in range(40)]
    sents += sents[:3]  # a few repeats: a sample's n-grams then also occur in another
    samples, refs = sents[:25], sents[25:]
    want = bleu_orders(samples, [refs] * len(samples))
    assert bleu(samples, refs) == pytest.approx(want, abs=1e-9)
    others = [sents[:i] + sents[i + 1:] for i in range(len(sents))]
    assert self_bleu(sents) == pytest.approx(bleu_orders(sents, others), abs=1e-9)
    assert 0 < want[2] < 1


def test_text_training_and_predict(tmp_path, capsys):
    from zoo.predict import main as predict_main
    from zoo.train import train

    path = write_corpus(tmp_path, grammar_sentences(300, 0))
    result = train(
        [
            "recipe=seqgan_text",
            f"run_dir={tmp_path}/runs",
            f"data.path={path}",
            "data.max_len=12",
            "data.batch_size=32",
            "model.mle_epochs=6",
            "model.d_pretrain_rounds=1",
            "model.adv_iterations=1",
            "model.rollouts=2",
            "model.adv_batch_size=8",
            "model.dis_filter_sizes=[1,2,3]",
            "model.dis_num_filters=[8,8,8]",
            "model.test_bleu_samples=20",
            "model.bleu_samples=10",
            "model.bleu_refs=20",
            "trainer.enable_progress_bar=false",
        ]
    )
    metrics = result.test_metrics
    for key in (
        "test/bleu2",
        "test/bleu3",
        "test/bleu4",
        "test/self_bleu4",
        "test/nll",
        "test/d_acc",
        "test/d_real",
        "test/d_fake",
        "test/d_train_real",
        "test/bleu4_mle",
    ):
        assert key in metrics
    assert metrics["test/d_acc"] == pytest.approx((metrics["test/d_real"] + metrics["test/d_fake"]) / 2, abs=1e-6)
    assert 0 < metrics["test/bleu2"] <= 1
    # G learned the language: held-out NLL per token well below a uniform guess over the vocabulary
    # (words and [EOS] only, not the padding: 2.8 nats against log V = log 57 = 4.0 here, seed 0, 6 MLE epochs)
    vocab = len(result.model.data_info["vocab"])
    assert metrics["test/nll"] < math.log(vocab) - 0.5, (metrics["test/nll"], vocab)
    assert (result.run_dir / "plots" / "test_samples.txt").is_file()
    ckpt = result.run_dir / "checkpoints" / "last.ckpt"
    capsys.readouterr()
    assert predict_main([str(ckpt), "n=4", "seed=1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and all(isinstance(line, str) for line in lines)
    assert predict_main([str(ckpt), "method=sbs", "k=3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and len(set(lines)) == 3  # k distinct sequences, each with its log-prob
    logps = [float(line.split()[0]) for line in lines]
    assert all(lp <= 0 for lp in logps) and logps == sorted(logps, reverse=True)  # most probable first
    assert predict_main([str(ckpt), "method=beam"]) == 2  # a user error, not a traceback
    assert "'method' in seqgan (zoo.predict) must be one of ['sample', 'sbs'], got 'beam'" in capsys.readouterr().err


def test_oracle_model_predict_prints_token_ids(capsys):
    from seqgan_testlib import tiny_data, tiny_model

    model = tiny_model(tiny_data())
    model.predict_cli([], {"n": 5})
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 5 and all(len(line.split()) == 8 for line in lines)
    assert all(0 <= int(tok) < 30 for line in lines for tok in line.split())
    with pytest.raises(UserError, match="unknown option"):
        model.predict_cli([], {"m": 5})


def test_compressed_text_file_reads_as_its_text(tmp_path):
    """data.path=corpus.txt.gz (or .bz2 / .xz / a zip of one file) gives the plain file's lines; a gzip
    file is not refused as binary."""
    plain = write_corpus(tmp_path)
    packed = tmp_path / "corpus.txt.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_lines(packed, lowercase=True) == read_lines(plain, lowercase=True)
    assert len(read_lines(packed, lowercase=True)) == 36
