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
