"""SeqGAN's inference API (seqgan/predict.py): generate and nll on the released oracle model (the card's
test NLL, zoo.predict's samples) and on a small text model (strings in, strings out)."""

import pytest
import torch
from seqgan_testlib import TINY_MODEL

import zoo
from tests.api_testlib import model_datamodule
from zoo.errors import UserError
from zoo.models.seqgan.data import TextData
from zoo.models.seqgan.module import SeqGAN
from zoo.predict import main as predict


@pytest.fixture(scope="module")
def oracle_model():
    return zoo.load("seqgan-oracle-small")


@pytest.fixture(scope="module")
def text_model():
    dm = TextData({"num_generated": 300, "max_len": 12, "batch_size": 16})
    dm.setup()
    torch.manual_seed(0)
    return SeqGAN(dict(TINY_MODEL), dm.info()).eval()


def test_generate_shapes_seeds_and_zoo_predict(oracle_model, capsys):
    seqs = oracle_model.generate(4, seed=7)
    assert seqs.shape == (4, 20) and seqs.dtype == torch.int64 and seqs.device == oracle_model.device
    assert torch.equal(seqs, oracle_model.generate(4, seed=7))
    assert not torch.equal(seqs, oracle_model.generate(4, seed=8))
    assert predict(["seqgan-oracle-small", "n=4", "seed=7"]) == 0
    printed = [[int(t) for t in line.split()] for line in capsys.readouterr().out.splitlines()]
    assert printed == seqs.tolist()


def test_nll_gives_the_cards_test_nll(oracle_model):
    """The card's test/nll (zoo.evaluate's: G's per-token NLL of the 512 held-out sequences) is the mean of
    nll(per_token=True) over them (every sequence has 20 tokens)."""
    test = torch.cat(list(model_datamodule(oracle_model).test_dataloader()))
    assert test.shape == (512, 20)
    per_token = oracle_model.nll(test, per_token=True)
    assert per_token.shape == (512,) and torch.allclose(oracle_model.nll(test), 20 * per_token)
    assert abs(per_token.mean().item() - oracle_model.run_info["card"]["metrics"]["test/nll"]) < 1e-4


def test_beam_samples_are_distinct_and_ranked_like_predict(oracle_model, capsys):
    seqs, log_p = oracle_model.beam_samples(3, seed=1)
    assert seqs.shape == (3, 20) and len({tuple(s) for s in seqs.tolist()}) == 3
    assert torch.allclose(-log_p, oracle_model.nll(seqs), atol=1e-3)  # the search's scores are log p(sequence)
    assert predict(["seqgan-oracle-small", "method=sbs", "k=3", "seed=1"]) == 0
    printed = sorted(float(line.split()[0]) for line in capsys.readouterr().out.splitlines())
    assert printed == pytest.approx(sorted(log_p.tolist()), abs=1e-3)


def test_text_model_takes_and_gives_strings(text_model):
    lines = text_model.generate(3, seed=0)
    assert isinstance(lines, list) and len(lines) == 3 and all(isinstance(s, str) for s in lines)
    assert lines == text_model.generate(3, seed=0)
    known = "the cat sees a dog"
    ids = text_model.token_ids([known])  # words, [EOS], [PAD]s
    d = text_model.data_info
    assert ids[0, 5] == d["eos_token"] and (ids[0, 6:] == d["pad_token"]).all()
    nll, per_token = text_model.nll([known]), text_model.nll([known], per_token=True)
    assert nll.shape == (1,) and torch.allclose(per_token, nll / 6)  # 5 words and [EOS]: not the padding
    assert torch.allclose(text_model.nll(ids), nll)
    assert torch.allclose(text_model.nll(["the cat sees a zyzzyva"]), text_model.nll(["the cat sees a [UNK]"]))


@pytest.mark.parametrize("call, expected", [
    (lambda m: m.generate(0), "n must be an integer >= 1, got 0"),
    (lambda m: m.generate(2, seed="x"), "seed must be an integer"),
    (lambda m: m.nll(torch.zeros(2, 5, dtype=torch.long)), r"tensor of token ids \(B, 20\), got \(2, 5\)"),
    (lambda m: m.nll(torch.zeros(2, 20)), r"tensor of token ids \(B, 20\)"),
    (lambda m: m.nll(torch.full((1, 20), 1000)), r"token ids must be in \[0, 1000\)"),
    (lambda m: m.nll(["a sentence"]), "models token ids, not text"),
    (lambda m: m.beam_samples(0), "k must be an integer >= 1"),
])
def test_bad_input_is_one_clear_error(oracle_model, call, expected):
    with pytest.raises(UserError, match=expected):
        call(oracle_model)
