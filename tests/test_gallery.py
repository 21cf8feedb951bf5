"""The gallery's pictures (docs/gallery.py, ``make gallery``) show what the words beside them name."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def drawn(monkeypatch):
    """docs/gallery.py as a module whose ``save`` keeps each figure (stem -> figure) instead of writing it."""
    spec = importlib.util.spec_from_file_location("gallery", ROOT / "docs" / "gallery.py")
    gallery = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gallery", gallery)  # its dataclasses look their module up there
    spec.loader.exec_module(gallery)
    figures = {}

    def keep(picture, stem, colours=128):
        figures[stem] = picture
        return f"gallery/{stem}.png"

    monkeypatch.setattr(gallery, "save", keep)
    yield gallery, figures
    for fig in figures.values():
        gallery.plt.close(fig)


def test_seqgan_histogram_draws_every_generator_its_caption_names(drawn):
    gallery, figures = drawn
    gallery.SEQGAN_SAMPLES = 100  # the page's 2,000 take ~30 s on one CPU core
    section = gallery.seqgan("seqgan-oracle-small")
    labels = [t.get_text() for t in figures["seqgan-oracle-small_nll"].axes[0].get_legend().get_texts()]
    caption = section.parts[1]
    for who, named in (("oracle's own samples", "the oracle"), ("adversarially trained", "SeqGAN's generator"),
                       ("MLE pre-training", "after MLE pre-training"), ("untrained", "an untrained G")):
        assert any(who in label for label in labels), (who, labels)
        assert named in caption, (named, caption)


def test_ood_section_draws_and_tabulates_every_ood_set_the_near_ones_too(drawn):
    """The OOD section's ROC panels, its picture of scored examples and its table cover every OOD test set of the
    digits, blends and letters among them (ood-digits-ce: the joint section also trains the 2-D toy)."""
    gallery, figures = drawn
    section = gallery.ood("ood-digits-ce")
    sets = ["photos", "uniform", "gaussian", "rot90", "blends", "letters"]
    titles = [ax.get_title() for ax in figures["ood-digits-ce_roc"].axes if ax.get_visible()]
    assert titles == [f"in vs {s}" for s in sets]
    rows = [ax.get_ylabel() for ax in figures["ood-digits-ce_sets"].axes[::8]]
    assert rows == ["digits (in)", *sets]
    scored = [ax.get_title() for ax in figures["ood-digits-ce_sets"].axes]
    assert len(scored) == 8 * 7 and all(0 <= float(t) <= 1 for t in scored)
    table = section.parts[-1].splitlines()
    assert table[0].startswith("| TNR@TPR95") and "Mahalanobis" in table[0]
    assert [r.split(" | ")[0] for r in table[2:]] == [f"| {s}" for s in sets]
