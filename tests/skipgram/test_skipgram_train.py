"""Training on the planted corpus: quality rises, objectives agree, NCE self-normalises,
runs are reproducible; the zoo.train / zoo.evaluate / zoo.predict paths work end to end."""

import pytest
import torch
from gensim.models import KeyedVectors

from zoo.errors import UserError
from zoo.models.skipgram.data import SyntheticCorpusData
from zoo.models.skipgram.evaluation import similarity_score
from zoo.models.skipgram.loop import train_chunk
from zoo.models.skipgram.nets import SkipGram
from zoo.train import train

PLANTED = "{groups: 20, forms: 3, function_words: 10, tokens: 150000}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    dm = SyntheticCorpusData({"root": str(root), "chunk_tokens": 50000,
                              "planted": {"groups": 20, "forms": 3, "function_words": 10, "tokens": 150000}})
    dm.setup("fit")
    return dm


def fit(dm, objective: str, epochs: int = 3, seed: int = 0, dim: int = 32) -> SkipGram:
    info = dm.info()
    torch.manual_seed(seed)
    net = SkipGram(info["counts"], dim, objective, negative=5)
    done, total = 0, info["train_words"] * epochs
    for epoch in range(epochs):
        dm.set_epoch(epoch)
        for k, item in enumerate(dm.train_set):
            lr0 = 0.025 * max(1e-4, 1 - done / total)
            done += item["raw_words"]
            lr1 = 0.025 * max(1e-4, 1 - done / total)
            train_chunk(net, item["tokens"], item["sentence"], item["window"], 5, lr0, lr1, 2048,
                        seed=seed * 1000 + epoch * 100 + k)
    return net


def spearman(dm, net) -> float:
    index = {w: i for i, w in enumerate(dm.words)}
    return similarity_score(net.centre, index, dm.eval_sets["val"][0]["pairs"])["spearman"]


def test_objectives_agree_and_nce_self_normalises(corpus):
    nets = {obj: fit(corpus, obj) for obj in ("negative_sampling", "nce", "full_softmax")}
    scores = {obj: spearman(corpus, net) for obj, net in nets.items()}
    # an untrained model scores ~0; all three objectives find the planted groups (seed 0)
    assert abs(spearman(corpus, SkipGram(corpus.info()["counts"], 32))) < 0.3
    assert min(scores.values()) > 0.8, scores
    assert max(scores.values()) - min(scores.values()) < 0.1, scores
    # NCE's scores estimate log p(w|c) without a normaliser, so log Z(c) ~ 0; negative
    # sampling has no such property (its optimum is shifted by log k q(w))
    log_z = {obj: torch.logsumexp(net.centre @ net.context.T, 1)[:30].mean().item()
             for obj, net in nets.items()}
    assert abs(log_z["nce"]) < 0.5, log_z
    assert log_z["negative_sampling"] > 1.5, log_z


def test_training_is_reproducible_given_the_seed(corpus):
    a, b = fit(corpus, "negative_sampling", epochs=1), fit(corpus, "negative_sampling", epochs=1)
    assert torch.equal(a.centre, b.centre) and torch.equal(a.context, b.context)
    c = fit(corpus, "negative_sampling", epochs=1, seed=1)
    assert not torch.equal(a.centre, c.centre)


def test_train_evaluate_predict_end_to_end(tmp_path, capsys):
    from zoo.evaluate import evaluate
    from zoo.predict import main as predict

    result = train(["recipe=skipgram_synthetic", f"run_dir={tmp_path}/runs", f"data.root={tmp_path}/data",
                    f"data.planted={PLANTED}", "data.chunk_tokens=50000", "trainer.max_epochs=2",
                    "model.dim=32",
                    "trainer.enable_progress_bar=false", "model.neighbours=[g01a]"])
    metrics = result.test_metrics
    assert metrics["test/spearman"] > 0.8, metrics
    assert metrics["test/planted_analogies_acc"] > 0.5, metrics
    assert metrics.get("test/planted_oov") == 0.0, metrics
    assert (result.run_dir / "plots" / "embedding_pca.png").exists()
    ckpt = str(result.run_dir / "checkpoints" / "last.ckpt")
    again = evaluate(ckpt, {"data.root": f"{tmp_path}/data"})
    assert again["test/spearman"] == pytest.approx(metrics["test/spearman"])

    capsys.readouterr()
    assert predict([ckpt, "g01a", "nonword", "topn=3", "analogy=g01a,g01b,g02a",
                    f"export={tmp_path}/v.bin"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("g01a: ") and "not in the vocabulary: nonword" in out
    assert "g01a : g01b = g02a : g02b" in out  # the planted analogy is the top answer
    kv = KeyedVectors.load_word2vec_format(f"{tmp_path}/v.bin", binary=True)
    assert kv.most_similar("g01a", topn=1)[0][0].startswith("g01")  # a word of the same group
    assert predict([ckpt, "analogy=a,b"]) == 2
    capsys.readouterr()
    assert predict([ckpt, "g01a", "analogy=a,b"]) == 2 and capsys.readouterr().out == ""  # refused before printing
    assert predict([ckpt, "g01a", "topn=0"]) == 2
    assert predict([ckpt, "zzzzqq", "nonword"]) == 2  # no word known: an error, not an empty answer


def test_user_errors(tmp_path):
    with pytest.raises(UserError, match="objective"):
        train(["recipe=skipgram_synthetic", f"run_dir={tmp_path}", "model.objective=hierarchical"])
    with pytest.raises(UserError, match="planted"):
        train(["recipe=skipgram_synthetic", f"run_dir={tmp_path}", "data.planted={colours: 3}"])
    with pytest.raises(UserError, match="text8"):
        train(["recipe=skipgram_text8", f"run_dir={tmp_path}", f"data.files={tmp_path}/text8"])


def test_estimator_loss_feeds_the_gradient_variance_probe(corpus):
    from zoo.callbacks.grad_variance import GradientVarianceCallback
    from zoo.models.skipgram.module import SkipGramModule

    stats = {}
    for objective in ("negative_sampling", "full_softmax"):
        model = SkipGramModule({"dim": 16, "objective": objective}, corpus.info())
        batch = next(iter(corpus.train_set))
        stats[objective] = GradientVarianceCallback(repeats=4).measure(model, batch)
    assert stats["negative_sampling"]["grad_var"] > 0  # the noise words make it a random estimate
    assert stats["full_softmax"]["grad_var"] < 1e-12 * max(1.0, stats["negative_sampling"]["grad_var"])


def test_text_corpus_run_and_evaluate_without_the_corpus(tmp_path):
    """A text8-format file trains; a finished model is then evaluated from the similarity and
    analogy files alone (a pretrained text8 model must not need text8)."""
    from zoo.evaluate import evaluate

    (tmp_path / "text8").write_text(" ".join(["king queen man woman france paris tiger cat"] * 2000))
    result = train(["recipe=skipgram_text8", f"run_dir={tmp_path}/runs", f"data.files={tmp_path}/text8",
                    f"data.root={tmp_path}/data", "trainer.max_epochs=1", "trainer.enable_progress_bar=false",
                    "model.dim=16", "data.chunk_tokens=5000"])
    assert 0 < result.test_metrics["test/wordsim353_oov"] < 1  # tiger/cat and king/queen are scored
    (tmp_path / "text8").unlink()
    metrics = evaluate(str(result.run_dir / "checkpoints" / "last.ckpt"))
    assert metrics["test/spearman"] == pytest.approx(result.test_metrics["test/spearman"], nan_ok=True)
    assert "test/questions_words_acc" in metrics and "test/simlex999_spearman" in metrics


def test_a_chunk_whose_own_updates_diverge_stops_the_run_at_that_step(tmp_path, monkeypatch, capsys):
    # the loss is summed before each update, so it cannot show a NaN the chunk's updates make;
    # the tables are checked after every chunk (here the first one poisons a row and reports a good loss)
    import zoo.models.skipgram.module as module
    from zoo.train import main

    def poisoned(net, *args, **kwargs):
        with torch.no_grad():
            net.centre[0] = float("nan")
        return {"loss": 1.0}

    monkeypatch.setattr(module, "train_chunk", poisoned)
    code = main(["recipe=skipgram_synthetic", "model.updates=minibatch", f"data.planted={PLANTED}",
                 f"data.root={tmp_path}/data", f"run_dir={tmp_path}/runs", "trainer.max_epochs=1"])
    err = capsys.readouterr().err
    assert code == 1 and "became nan at step 0" in err
    assert not (tmp_path / "runs").exists()  # stopped before a checkpoint of the broken tables


def test_minibatch_nce_trains_without_subsampling_on_the_planted_vocabulary(tmp_path):
    """The recipe's 180-word corpus with data.sample=0: every minibatch piles thousands of noise
    terms on the function words, many saturated on the wrong side. With the cap's curvature taken
    as sig'(s) the first chunk diverges; with ``path_curvature`` one epoch reaches Spearman
    0.69-0.71 (seeds 0-2; threshold 0.5; an untrained model scores ~0)."""
    result = train(["recipe=skipgram_synthetic_nce", "model.updates=minibatch", "data.sample=0",
                    f"data.root={tmp_path}/data", f"run_dir={tmp_path}/runs", "trainer.max_epochs=1",
                    "trainer.enable_progress_bar=false"])
    assert result.test_metrics["test/planted_spearman"] > 0.5, result.test_metrics


def test_step_cap_method_auto_is_newton_except_for_the_full_softmax(corpus):
    """``step_cap_method=auto``: the damped Newton step for nce / negative sampling, the line search
    for the full softmax (where Newton steps reached planted Spearman 0.597 without subsampling,
    the line search 0.941: docs/skipgram.md); an explicit method is kept."""
    from zoo.models.skipgram.module import SkipGramModule

    def method(**options) -> str:
        return SkipGramModule({"dim": 8, **options}, corpus.info()).net.cap_method

    assert method(objective="negative_sampling") == "newton"
    assert method(objective="nce") == "newton"
    assert method(objective="full_softmax") == "line"
    assert method(objective="full_softmax", step_cap_method="newton") == "newton"


@pytest.mark.reproduce
def test_full_softmax_minibatch_learns_the_planted_vocabulary_without_subsampling(tmp_path):
    """The softmax recipe with data.sample=0 on the minibatch path, 5 epochs (seed 0): with the
    default (line search) step cap Spearman 0.941; with the damped Newton step it fell to 0.597
    (`benchmarks/results/skipgram_step_cap_newton.json`); threshold 0.9."""
    result = train(["recipe=skipgram_synthetic_softmax", "data.sample=0", f"data.root={tmp_path}/data",
                    f"run_dir={tmp_path}/runs", "trainer.enable_progress_bar=false"])
    assert result.test_metrics["test/planted_spearman"] > 0.9, result.test_metrics


def test_a_checkpoint_from_before_the_newton_cap_trains_with_the_cap(corpus):
    """Configs saved before 2026-11-25 hold ``step_cap: null`` (then: automatic); loading one must
    not turn the cap off (a 65,536-window step diverges without it)."""
    from zoo.models.skipgram.module import SkipGramModule

    assert SkipGramModule({"dim": 8, "step_cap": None}, corpus.info()).net.step_cap is True
    assert SkipGramModule({"dim": 8, "step_cap": False}, corpus.info()).net.step_cap is False


def test_lr_falls_linearly_to_its_floor_as_gensims_alpha_does(corpus):
    """lr0 -> lr0 * min_lr_ratio in a straight line over the run (gensim's alpha -> min_alpha), not
    towards 0 and stopping at the floor (word2vec.c), 0.4 % less step in all with
    gensim's 1e-4 / 0.025 (docs/skipgram.md)."""
    from zoo.models.skipgram.module import SkipGramModule

    model = SkipGramModule({"dim": 8, "lr": 0.025, "min_lr_ratio": 0.004}, corpus.info())
    total = corpus.info()["train_words"]  # no trainer attached: one epoch
    assert model.lr_at(0) == pytest.approx(0.025, rel=1e-12)
    assert model.lr_at(total / 2) == pytest.approx((0.025 + 1e-4) / 2, rel=1e-12)
    assert model.lr_at(total) == pytest.approx(1e-4, rel=1e-12)
    assert model.lr_at(2 * total) == pytest.approx(1e-4, rel=1e-12)  # a longer run stays at the floor


def test_a_stop_on_an_epochs_last_chunk_resumes_into_the_next_epoch_exactly(tmp_path):
    """Lightning resumes that checkpoint into the next epoch without on_train_epoch_start, which keys the
    corpus's subsampling: the resumed epoch must not keep the saved one's number (its loader would skip all 6
    chunks, and the run end at step 6 of 12 having trained nothing more; seed 0, one thread: exact). On the CPU: the
    sequential kernel is exact there; a GPU takes the minibatch path, whose index_add_ sums in no fixed order."""
    common = ["recipe=skipgram_synthetic", "trainer.max_epochs=2", "data.planted.tokens=200000",
              "data.chunk_tokens=40000", "test_after_fit=false", "trainer.enable_progress_bar=false", "logger=[csv]",
              "trainer.accelerator=cpu"]
    straight = train([*common, f"run_dir={tmp_path}/straight"])
    cut = train([*common, f"run_dir={tmp_path}/cut", "callbacks=[{name: 'toymodel:SignalAt', step: 6}]"])
    assert cut.interrupted
    resumed = train([*common, f"run_dir={tmp_path}/cut", "ckpt_path=last"])
    a, b = (torch.load(r.run_dir / "checkpoints" / "last.ckpt", weights_only=True) for r in (straight, resumed))
    assert a["global_step"] == b["global_step"] == 12
    for key in a["state_dict"]:
        assert torch.equal(a["state_dict"][key], b["state_dict"][key]), key


def test_a_checkpoint_holds_the_vocabulary_as_two_strings_and_list_vocabularies_still_load(corpus):
    """The model saves its vocabulary and counts each as one string (a list costs one pickler call a word and a
    count on every checkpoint save); a model built from the saved form, or from lists (checkpoints and pretrained
    cards made before), has the same words, counts and noise distribution."""
    import io

    from zoo.models.skipgram.module import SkipGramModule

    info = corpus.info()
    model = SkipGramModule({"dim": 8}, info)
    saved = model.hparams["data_info"]
    assert isinstance(saved["vocab"], str) and isinstance(saved["counts"], str)
    buffer = io.BytesIO()
    torch.save({"hyper_parameters": dict(model.hparams)}, buffer)
    buffer.seek(0)
    again = SkipGramModule(**torch.load(buffer, weights_only=True)["hyper_parameters"])
    from_lists = SkipGramModule({"dim": 8}, {**info, "vocab": list(info["vocab"]), "counts": list(info["counts"])})
    for other in (again, from_lists):
        assert other.words == info["vocab"] and other.data_info["counts"] == saved["counts"]
        assert torch.equal(other.net.sampler.prob, model.net.sampler.prob)
    odd = {**info, "vocab": ["a\nb", *info["vocab"][1:]]}  # a word with a newline stays a list
    assert SkipGramModule({"dim": 8}, odd).words == odd["vocab"]


def test_the_chunks_table_check_runs_on_one_thread_and_gives_the_threads_back(corpus, monkeypatch):
    """Every chunk sums both tables to catch a diverged update; with two intra-op threads on a busy 2-core machine
    the two sums took ~30 ms a chunk against ~4 ms on one: the check runs on one, and finds a non-finite row."""
    from zoo.models.skipgram.module import SkipGramModule

    model = SkipGramModule({"dim": 8}, corpus.info())
    seen, isfinite = [], torch.isfinite
    monkeypatch.setattr(torch, "isfinite", lambda x: seen.append(torch.get_num_threads()) or isfinite(x))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert model.tables_finite() and seen == [1] and torch.get_num_threads() == 2
        model.net.context.data[3, 1] = float("inf")
        assert not model.tables_finite()
    finally:
        torch.set_num_threads(before)


def test_validation_scores_on_one_thread(corpus, monkeypatch):
    """Validation's few hundred cosines: five validations took ~1 s with two intra-op threads on a busy 2-core
    machine, ~0.13 s with one. They run on one; the caller's count is given back."""
    import zoo.models.skipgram.module as module

    model = module.SkipGramModule({"dim": 8}, corpus.info())
    seen, score = [], module.similarity_score

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return score(*args, **kwargs)

    monkeypatch.setattr(module, "similarity_score", recording)
    monkeypatch.setattr(model, "log", lambda *a, **k: None)  # no trainer to log to
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model.validation_step(corpus.eval_sets["val"][0], 0)
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
