"""The skip-gram benchmark's quality measures (benchmarks/common/skipgram_measures.py) compare the zoo with
gensim fairly: the same questions for both, whatever order each tool gives words of equal count."""

from __future__ import annotations

import torch

from benchmarks.common.skipgram_measures import neighbour_agreement, score


def test_analogy_questions_do_not_depend_on_how_ties_are_ordered(tmp_path):
    """Eight words, the last four of equal count; one tool lists the ties a-b-c-d, the other d-c-b-a
    (the zoo sorts ties by code point, gensim by first appearance). Question 1 (x:y = a:b) is answered
    right (b = y - x + a), question 2 (x:y = c:d) wrong (p lies nearer y - x + c than d does).
    Whole-vocabulary analogies give both orders both questions: 50 %. A cut at 6 words, inside the
    tie (word2vec's way, which this replaces), keeps question 1 for one order (100 %) and question 2
    for the other (0 %)."""
    analogies = tmp_path / "questions.txt"
    analogies.write_text(": section\nx y a b\nx y c d\n")
    e = torch.eye(6)  # cpu: a test's word vectors
    table = {"x": e[0], "y": e[1], "p": e[1] - e[0] + e[3] + 0.1 * e[5], "q": e[5],
             "a": e[2], "b": e[1] - e[0] + e[2], "c": e[3], "d": e[4]}
    orders = {"zoo": ["x", "y", "p", "q", "a", "b", "c", "d"], "gensim": ["x", "y", "p", "q", "d", "c", "b", "a"]}

    def run(order, restrict=None):
        out = score(torch.stack([table[w] for w in order]), order, [], [str(analogies)], restrict)
        return out["questions"]

    assert run(orders["zoo"]) == run(orders["gensim"]) == {"accuracy": 0.5, "oov": 0.0}
    assert run(orders["zoo"], 6) == {"accuracy": 1.0, "oov": 0.5}
    assert run(orders["gensim"], 6) == {"accuracy": 0.0, "oov": 0.5}


def embedding(n_words: int, seed: int) -> tuple[torch.Tensor, list[str]]:
    g = torch.Generator().manual_seed(seed)  # cpu: a test's word vectors
    return torch.randn(n_words, 8, generator=g), [f"w{i:03d}" for i in range(n_words)]


def test_neighbour_agreement_is_one_for_the_same_geometry_and_small_for_unrelated_vectors():
    """Cosine neighbours survive a rotation and a rescaling of each vector (agreement 1); two
    independent random tables (seeds 0 and 1, 300 words, k=10) share about k/299 of each list: the
    measured mean must stay under 0.15."""
    vectors, words = embedding(300, 0)
    rotation, _ = torch.linalg.qr(torch.randn(8, 8, generator=torch.Generator().manual_seed(2)))  # cpu: test
    scaled = (vectors @ rotation) * torch.rand(300, 1, generator=torch.Generator().manual_seed(3)).add(0.5)  # cpu
    assert neighbour_agreement(vectors, words, scaled, words, n=100) == 1.0
    other, _ = embedding(300, 1)
    assert neighbour_agreement(vectors, words, other, words, n=100) < 0.15


def test_neighbour_agreement_is_symmetric_when_the_tools_order_ties_differently():
    """Tool b lists words 95-104 (a tie around rank n = 100) in reverse and lacks word 7: the same 100
    words are compared in both directions (the smallest rank sums), so the two directions agree, and
    a word one table lacks is neither compared nor a neighbour."""
    a, words = embedding(300, 0)
    b, _ = embedding(300, 1)
    b = 2 * a + b  # related, so that which words are compared shows in the value
    order = list(range(95)) + list(range(104, 94, -1)) + list(range(105, 300))
    order.remove(7)
    words_b, b = [words[i] for i in order], b[order]
    forward = neighbour_agreement(a, words, b, words_b, n=100)
    assert forward == neighbour_agreement(b, words_b, a, words, n=100)
    assert 0.2 < forward < 1.0
