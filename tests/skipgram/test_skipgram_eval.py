"""Evaluation file parsers, metrics on constructed vectors, word2vec export round trips."""

import pytest
import torch
from gensim.models import KeyedVectors

from zoo.errors import UserError
from zoo.models.skipgram.evaluation import (
    analogy_score,
    nearest,
    read_analogies,
    read_similarity,
    similarity_score,
)
from zoo.models.skipgram.export import load_word2vec, save_word2vec


def test_read_wordsim_tsv_with_comments(tmp_path):
    p = tmp_path / "wordsim353.tsv"
    p.write_text("# The WordSimilarity-353 Test Collection\n# Word 1\tWord 2\tHuman (mean)\n"
                 "love\tsex\t6.77\ntiger\tcat\t7.35\n\n")
    assert read_similarity(p) == [("love", "sex", 6.77), ("tiger", "cat", 7.35)]


def test_read_wordsim_original_csv_with_header(tmp_path):
    p = tmp_path / "combined.csv"
    p.write_text("Word 1,Word 2,Human (mean)\nlove,sex,6.77\ntiger,cat,7.35\n")
    assert read_similarity(p) == [("love", "sex", 6.77), ("tiger", "cat", 7.35)]


def test_read_simlex_original_format_uses_the_simlex999_column(tmp_path):
    p = tmp_path / "SimLex-999.txt"
    p.write_text("word1\tword2\tPOS\tSimLex999\tconc(w1)\tconc(w2)\n"
                 "old\tnew\tA\t1.58\t2.72\t2.81\nsmart\tintelligent\tA\t9.2\t1.75\t2.46\n")
    assert read_similarity(p) == [("old", "new", 1.58), ("smart", "intelligent", 9.2)]


def test_read_simlex_gensim_format(tmp_path):
    p = tmp_path / "simlex999.txt"
    p.write_text("# The SimLex-999 Test data\n# Word 1\tWord 2\tHuman (mean)\nold\tnew\t1.58\n")
    assert read_similarity(p) == [("old", "new", 1.58)]


def test_read_similarity_rejects_garbage(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("a\tb\t1.0\nc\td\tlots\n")
    with pytest.raises(UserError, match="not a number"):
        read_similarity(p)


def test_read_questions_words(tmp_path):
    p = tmp_path / "questions-words.txt"
    p.write_text(": capital-common-countries\nAthens Greece Baghdad Iraq\nAthens Greece Bangkok Thailand\n"
                 ": gram2-opposite\nacceptable unacceptable aware unaware\n")
    sections = read_analogies(p)
    assert [name for name, _ in sections] == ["capital-common-countries", "gram2-opposite"]
    assert sections[0][1][1] == ("Athens", "Greece", "Bangkok", "Thailand")
    p.write_text(": s\na b c\n")
    with pytest.raises(UserError, match="4 words"):
        read_analogies(p)


def test_similarity_spearman_and_oov():
    words = [f"w{i}" for i in range(12)]
    index = {w: i for i, w in enumerate(words)}
    angles = torch.arange(12) * 0.25  # up to 2.75 rad: the cosine with w0 falls with the index
    vectors = torch.stack([angles.cos(), angles.sin()], 1)
    pairs = [("W0", f"w{k}", 12.0 - k) for k in range(1, 12)] + [("w1", "zzz", 3.0)]
    r = similarity_score(vectors, index, pairs, lowercase=True)
    assert r["spearman"] == pytest.approx(1.0)
    assert r["oov"] == pytest.approx(1 / 12) and r["pairs"] == 11
    r = similarity_score(vectors, index, [(a.lower(), b, -s) for a, b, s in pairs])
    assert r["spearman"] == pytest.approx(-1.0)


def test_similarity_on_fewer_than_ten_known_pairs_is_nan():
    """Two pairs in the vocabulary give a Spearman of exactly 1.0: nan, not a score reported (and monitored)."""
    import math

    from zoo.models.skipgram.evaluation import MIN_PAIRS

    index = {w: i for i, w in enumerate("abcdefghij")}
    vectors = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    pairs = [(a, b, float(i)) for i, (a, b) in enumerate(zip("abcdefghij", "bcdefghija"))]  # 10 known
    assert MIN_PAIRS == 10 and not math.isnan(similarity_score(vectors, index, pairs)["spearman"])
    r = similarity_score(vectors, index, pairs[:9] + [("a", "zzz", 1.0)])
    assert math.isnan(r["spearman"]) and r["pairs"] == 9 and r["oov"] == pytest.approx(0.1)


def test_similarity_of_one_dimensional_vectors_is_nan_without_a_warning():
    # with dim=1 every cosine is +-1; all the same, scipy warned ConstantInputWarning (an error under -W error)
    import math
    import warnings

    index = {w: i for i, w in enumerate("abcde")}
    pairs = [(a, b, float(i)) for i, (a, b) in enumerate((a, b) for a in "abcde" for b in "abcde" if a < b)]  # 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(similarity_score(torch.ones(5, 1), index, pairs)["spearman"])
        assert math.isnan(similarity_score(torch.tensor([[1.0], [2.0], [-1.0], [3.0], [-2.0]]), index,
                                           [(a, b, 1.0) for a, b, _ in pairs])["spearman"])


def test_analogy_accuracy_by_section_and_restriction():
    # word vectors with exact additive structure: country + capital offset
    words = ["france", "paris", "italy", "rome", "spain", "madrid", "big", "bigger"]
    index = {w: i for i, w in enumerate(words)}
    torch.manual_seed(0)
    base = torch.randn(8, 16)
    offset = torch.randn(16) * 3
    for country, capital in ((0, 1), (2, 3), (4, 5)):
        base[capital] = base[country] + offset
    sections = [("capital-world", [("france", "paris", "italy", "rome"),
                                   ("italy", "rome", "spain", "madrid")]),
                ("gram3-comparative", [("big", "bigger", "france", "paris")])]
    r = analogy_score(base, index, sections)
    assert r["capital-world"] == 1.0 and r["semantic"] == 1.0 and r["oov"] == 0.0
    assert r["all"] == pytest.approx(r["capital-world"] * 2 / 3 + r["gram3-comparative"] / 3)
    r = analogy_score(base, index, sections, restrict=4)  # spain/madrid/big/bigger are beyond the top 4
    assert r["oov"] == pytest.approx(2 / 3) and r["capital-world"] == 1.0


def test_nearest_excludes_the_query():
    v = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    sims, ids = nearest(v, v[:1], topn=2, exclude=torch.tensor([[0]]))
    assert ids.tolist() == [[1, 2]]


@pytest.mark.parametrize("suffix", [".txt", ".bin"])
def test_word2vec_export_round_trip_through_gensim(tmp_path, suffix):
    words = ["the", "king", "queen", "élan", "x"]
    vectors = torch.randn(5, 7, generator=torch.Generator().manual_seed(0))
    path = save_word2vec(tmp_path / f"vectors{suffix}", words, vectors)
    kv = KeyedVectors.load_word2vec_format(str(path), binary=suffix == ".bin")
    assert kv.index_to_key == words
    tol = 0 if suffix == ".bin" else 1e-5
    assert torch.allclose(torch.from_numpy(kv.vectors), vectors, atol=tol)
    back_words, back = load_word2vec(path)
    assert back_words == words and torch.allclose(back, vectors, atol=tol)
    # and gensim's own writer is read back by ours
    kv.save_word2vec_format(str(tmp_path / f"g{suffix}"), binary=suffix == ".bin")
    g_words, g_vectors = load_word2vec(tmp_path / f"g{suffix}")
    assert g_words == words and torch.allclose(g_vectors, vectors, atol=tol)


def test_export_refuses_words_with_spaces(tmp_path):
    with pytest.raises(UserError, match="whitespace"):
        save_word2vec(tmp_path / "v.txt", ["new york"], torch.zeros(1, 2))
