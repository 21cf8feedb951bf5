"""Skip-gram's inference API (skipgram/predict.py) on the released skipgram-synthetic: lookups agree with
gensim reading the exported file and with zoo.predict's table; unknown words name the closest known ones."""

import pytest
import torch

import zoo
from zoo.errors import UserError
from zoo.predict import main as predict


@pytest.fixture(scope="module")
def model():
    return zoo.load("skipgram-synthetic")


def test_vocabulary_and_vectors(model):
    words = model.vocabulary
    assert isinstance(words, list) and len(words) == len(model.vectors) and words[:2] == ["fn00", "g00b"]
    v = model.vector("fn00")
    assert v.shape == (model.cfg.dim,) and v.device == model.device and torch.equal(v, model.vectors[0])
    assert torch.equal(model.vector("FN00"), v)  # looked up lower-cased too
    assert model.similarity("fn00", "g00b") == pytest.approx(model.similarity("g00b", "fn00"))
    assert model.similarity("fn00", "fn00") == pytest.approx(1.0)


@pytest.mark.parametrize("binary", [False, True])
def test_gensim_reads_the_export_and_agrees(model, tmp_path, binary):
    from gensim.models import KeyedVectors

    path = model.save_word2vec(tmp_path / ("v.bin" if binary else "v.txt"), binary=binary)
    kv = KeyedVectors.load_word2vec_format(str(path), binary=binary)
    assert list(kv.index_to_key) == model.vocabulary
    assert torch.allclose(torch.from_numpy(kv.vectors), model.vectors.cpu(), atol=1e-5 if not binary else 0)
    ours, theirs = model.most_similar("g00b", topn=5), kv.most_similar("g00b", topn=5)
    assert [w for w, _ in ours] == [w for w, _ in theirs]
    assert [s for _, s in ours] == pytest.approx([s for _, s in theirs], abs=1e-4)
    assert model.similarity("fn00", "g00d") == pytest.approx(float(kv.similarity("fn00", "g00d")), abs=1e-4)
    answer = kv.most_similar(positive=["g00b", "g00c"], negative=["fn00"], topn=3)  # fn00 : g00b = g00c : ?
    assert [w for w, _ in model.analogy("fn00", "g00b", "g00c", topn=3)] == [w for w, _ in answer]


def test_most_similar_of_a_vector_and_predict_table(model, capsys):
    by_word = model.most_similar("g00b", topn=4)
    assert "g00b" not in [w for w, _ in by_word]
    by_vector = model.most_similar(model.vector("g00b"), topn=5)  # the word itself comes first, at 1.0
    assert by_vector[0][0] == "g00b" and by_vector[0][1] == pytest.approx(1.0) and by_vector[1:] == by_word
    assert predict(["skipgram-synthetic", "g00b", "topn=4"]) == 0
    assert capsys.readouterr().out.strip() == "g00b: " + ", ".join(f"{w} {s:.2f}" for w, s in by_word)


@pytest.mark.parametrize("call, expected", [
    (lambda m: m.vector("g00x"), r"'g00x' is not in the vocabulary \(180 words.*the closest known: g00"),
    (lambda m: m.most_similar("qqqqqq"), "not in the vocabulary.*; e.g. fn00"),
    (lambda m: m.most_similar("fn00", topn=0), "topn must be an integer >= 1"),
    (lambda m: m.most_similar(torch.zeros(3)), r"a query vector has shape \(100,\), got \(3,\)"),
    (lambda m: m.analogy("fn00", "g00b", 3), "a word is a string, got int"),
])
def test_bad_input_is_one_clear_error(model, call, expected):
    with pytest.raises(UserError, match=expected):
        call(model)


def test_the_embedding_map_gives_each_coloured_group_its_own_colour():
    """40 planted groups cannot be told apart in one palette: COLOURED groups get a colour each, named in the
    legend; the others are one grey, the function words their own marker."""
    from matplotlib.colors import to_hex

    from zoo.models.skipgram.plots import COLOURED, embedding_map

    groups = [-1] * 5 + [g for _ in range(4) for g in range(40)]  # 5 function words, 40 groups of 4 forms
    words = [f"w{i}" for i in range(len(groups))]
    fig = embedding_map(torch.randn(len(groups), 8, generator=torch.Generator().manual_seed(0)), words, groups,
                        n=len(groups))
    ax = fig.axes[0]
    coloured = {c.get_label(): to_hex(c.get_facecolor()[0]) for c in ax.collections
                if c.get_label().startswith("group ")}
    assert sorted(coloured) == sorted(f"group {k}" for k in range(COLOURED))
    assert len(set(coloured.values())) == COLOURED  # no two groups share a colour
    others = [c for c in ax.collections if c.get_label().startswith("groups ")]
    assert len(others) == 1 and len(others[0].get_offsets()) == 4 * (40 - COLOURED)
    assert len(ax.get_legend().get_texts()) == COLOURED + 2  # the groups, the grey rest, the function words


def test_the_embedding_maps_svd_runs_on_one_thread_and_gives_the_threads_back(monkeypatch):
    """The end-of-training figure's 200 x 100 SVD took ~1 s of CPU time with two intra-op threads on a busy 2-core
    machine and milliseconds with one: it runs on one, and the caller's thread count is restored."""
    from zoo.models.skipgram import plots

    seen, svd = [], torch.linalg.svd

    def recording_svd(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return svd(*args, **kwargs)

    monkeypatch.setattr(torch.linalg, "svd", recording_svd)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        vectors = torch.randn(30, 8, generator=torch.Generator().manual_seed(0))
        plots.embedding_map(vectors, [f"w{i}" for i in range(30)])
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
