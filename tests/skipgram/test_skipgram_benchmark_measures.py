"""The skip-gram benchmark's quality measures (benchmarks/skipgram_measures.py) compare the zoo with
gensim fairly: the same questions for both, whatever order each tool gives words of equal count."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from skipgram_measures import score  # noqa: E402


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
