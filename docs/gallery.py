"""The gallery (``make gallery``): pictures of every released model, made from its weights.

    python docs/gallery.py                      # every released model (about 2 minutes on 2 CPU cores)
    python docs/gallery.py --only maml-sinusoid # one model's section (the others keep their pictures)

Each released model (``zoo.list_pretrained()``) is loaded with ``zoo.load`` and drawn with its own plot functions
(zoo/models/<name>/plots.py); the pictures go to docs/gallery/ and the page docs/gallery.md shows each one beside
the command that made it and the card of the weights (zoo/pretrained/<name>.json). The OOD model's 2-D toy has no
released weights: its confidence map comes from a run of the toy's recipe that this script trains (seconds).
Everything is seeded: a second run draws the same pictures.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # python docs/gallery.py from a checkout: this checkout's zoo

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

import zoo  # noqa: E402

OUT = ROOT / "docs" / "gallery"  # the pictures
PAGE = ROOT / "docs" / "gallery.md"  # the page
DPI = 72  # small files: the pictures are committed
SEED = 0


@dataclass
class Section:
    """One released model's part of the page."""

    name: str  # the released entry
    parts: list[str] = field(default_factory=list)  # markdown blocks, in order


def rendered(picture) -> Image.Image:
    """A matplotlib figure, or an image tensor (N, C, H, W) in [0, 1] laid out in a grid of 8 a row."""
    buffer = io.BytesIO()
    if isinstance(picture, torch.Tensor):
        from torchvision.utils import save_image  # imported when used: torchvision

        save_image(picture.float().cpu(), buffer, format="png", nrow=8, padding=2, pad_value=0.6)
    else:
        picture.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
        plt.close(picture)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def save(picture, stem: str, colours: int = 128) -> str:
    """A picture (``rendered``; a list of them: side by side) -> docs/gallery/<stem>.png, quantised to ``colours``
    colours (a few kB to tens of kB). Returns the page's link to it."""
    parts = [rendered(p) for p in (picture if isinstance(picture, list) else [picture])]
    image = Image.new("RGB", (sum(p.width for p in parts), max(p.height for p in parts)), "white")
    for i, part in enumerate(parts):
        image.paste(part, (sum(p.width for p in parts[:i]), 0))
    image = image.quantize(colours, method=Image.Quantize.FASTOCTREE)  # octree keeps the hues (median cut did not)
    OUT.mkdir(parents=True, exist_ok=True)
    image.save(OUT / f"{stem}.png", optimize=True)
    return f"gallery/{stem}.png"


def test_data(data: dict):
    """The datamodule of a card's (or a checkpoint's) data options, set up for its test split (as
    ``zoo.evaluate`` builds it)."""
    from zoo.registry import DATAMODULES
    from zoo.schema import validate

    cfg = dict(data)
    entry = DATAMODULES.entry(cfg.pop("name"))
    dm = entry.obj(validate(entry.config, cfg, "data options") if entry.config else cfg)
    dm.prepare_data()
    dm.setup("test")
    return dm


def card_of(name: str) -> dict:
    return json.loads((ROOT / "zoo" / "pretrained" / f"{name}.json").read_text())


def card_block(card: dict) -> str:
    """The card that made the weights: what, how it was trained, its test numbers."""
    metrics = [(k, v) for k, v in card.get("metrics", {}).items() if k.count("/") == 1 and "_ci" not in k][:8]
    rows = [("recipe", f"`{card['recipe']}`"),
            ("trained by", f"`{card['command']}`"), ("evaluated by", f"`{card.get('evaluate', '')}`"),
            ("test metrics", ", ".join(f"{k.removeprefix('test/')} {v:.4g}" for k, v in metrics)),
            ("weights", f"`{card['weights']}` (sha256 `{card['sha256'][:12]}…`, {card['size_bytes'] / 1e3:.0f} kB, "
                        f"created {card.get('created', '?')}); the card: "
                        f"[zoo/pretrained/{card['name']}.json](../zoo/pretrained/{card['name']}.json)")]
    return f"| the card of `{card['name']}` | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def command_block(*lines: str) -> str:
    return "```bash\n" + "\n".join(lines) + "\n```"


def picture(link: str, alt: str, caption: str, pixels: bool = False) -> str:
    """A picture and its caption; ``pixels``: a small grid of pixels, shown twice its size, unsmoothed
    (docs/stylesheets/zoo.css: .zoo-pixels). Every picture opens at full size on click (mkdocs.yml: glightbox)."""
    return f"![{alt}]({link})" + ("{ .zoo-pixels }" if pixels else "") + f"\n\n*{caption}*"


# Words about one set of weights that no code can derive: a mistake seen in its pictures. Keyed by the card's
# sha256 (first 12 digits), so that new weights drop the note until someone looks at their pictures again.
NOTES = {
    ("sat-shapes-hard", "626d19bc3da2"):
        "Two of the three captions are wrong. Scene 0's reverses the relation: the big red diamond is below the "
        "small green circle, not above it. Scene 1's names the big blue diamond twice and leaves out the small blue "
        "triangle (at the word *blue* the attention is on the triangle), and the green square is right of the "
        "diamond, not above it. Scene 2's is right. The model's test BLEU-4 is 69 (the card below); the soft model "
        "names the right objects in all three scenes.",
}


# ---- one function per kind of model: (name) -> Section ------------------------------------------------------


def vae(name: str) -> Section:
    from zoo.models.vae.plots import pairs, upscale

    model = zoo.load(name)
    samples = model.sample(32, seed=SEED)  # (32, 1, 8, 8) E[x|z], z ~ p(z)
    batch = next(iter(test_data(card_of(name)["data"]).test_dataloader()))
    x = (batch[0] if isinstance(batch, (list, tuple)) else batch)[:24]  # (24, 1, 8, 8) test digits
    recon = model.reconstruct(x)
    s = Section(name)
    s.parts.append(command_block(f"python docs/gallery.py --only {name}",
                                 f"python -m zoo.predict {name} n=32 seed={SEED} out=samples.png  # the samples alone"))
    s.parts.append(picture(save(upscale(samples), f"{name}_samples"), f"{name} samples",
                           f"`model.sample(32, seed={SEED})`: the decoder's means for 32 draws of the prior",
                           pixels=True))
    s.parts.append(picture(save(upscale(pairs(x, recon)), f"{name}_reconstructions"), f"{name} reconstructions",
                           "`model.reconstruct(x)`: rows of 8 test digits, each row followed by its reconstructions",
                           pixels=True))
    return s


MAX_WORDS = 12  # panels a row of the attention figures: a caption's first words (the whole caption is written below)


def captioning(name: str) -> Section:
    from zoo.models.captioning.plots import attention_figure, displayable
    from zoo.models.captioning.shapes import generate_split

    model = zoo.load(name)
    split = generate_split(3, seed=5, split="test")
    scenes = [img.transpose(1, 2, 0) for img in split.images]  # (64, 64, 3) each
    result = model.caption(scenes, beam=3, return_attention=True)  # .attention (N, T, 8, 8)
    shown = displayable(model.preprocess(scenes), model.data_info.get("normalize", "unit"))
    fig = attention_figure(shown, [c.split() for c in result.text], result.attention.flatten(2),
                           tuple(result.attention.shape[2:]), max_words=MAX_WORDS,
                           titles=[f"test scene {i}" for i in range(len(scenes))])
    kind = ("Hard attention (one location sampled per word in training; when decoding, the most likely one: "
            "each panel lights one of the 8 x 8 cells)") if "hard" in name \
        else "Soft attention (a weighted average over the 8 x 8 locations)"
    s = Section(name)
    s.parts.append(command_block(f"python docs/gallery.py --only {name}",
                                 f"python -m zoo.predict {name} scene.png beam=3 overlay=attention.png   # your image"))
    s.parts.append(picture(save(fig, f"{name}_attention"), f"{name} attention",
                           f"{kind} over the time steps of the beam-3 caption of three test scenes "
                           "(`model.caption(images, beam=3, return_attention=True)`): one panel for each of the "
                           f"caption's first {MAX_WORDS} words (the whole captions are below), brighter where the "
                           "model looked"))
    s.parts.append("Captions: " + "; ".join(f"*{t}*" for t in result.text))
    s.parts.append("The data's captions of the same scenes (the first of each scene's three references): "
                   + "; ".join(f"*{refs[0]}*" for refs in split.refs))
    if note := NOTES.get((name, card_of(name)["sha256"][:12])):
        s.parts.append(note)
    return s


SEQGAN_SAMPLES = 2000  # sequences of each generator in SeqGAN's histogram


def seqgan(name: str) -> Section:
    from zoo.models.seqgan.nets import LSTMLM

    model = zoo.load(name)
    oracle, T, c = model.oracle, model.seq_len, model.cfg
    g = torch.Generator(device=oracle.head.weight.device).manual_seed(SEED)
    n = SEQGAN_SAMPLES
    init = torch.Generator().manual_seed(c.eval_seed + 3)  # the untrained G of the card's test/nll_oracle_random
    untrained = LSTMLM(model.gen.vocab_size, c.gen_emb_dim, c.gen_hidden_dim, model.gen.start_token)
    untrained = untrained.init_normal(c.gen_init_std, init)
    samples = {  # (n, T) token ids each
        "the oracle's own samples": oracle.sample(n, T, generator=g),
        "SeqGAN's G (adversarially trained)": model.generate(n, seed=SEED),
        "G after MLE pre-training only": model.sample_sequences(n, SEED, model.gen_mle),
        "an untrained G": model.sample_sequences(n, SEED, untrained),
    }
    with torch.no_grad():
        nll = {who: -oracle.log_prob(seqs).sum(-1).cpu() / T for who, seqs in samples.items()}  # (n,) nats/token
    bins = torch.linspace(min(v.min() for v in nll.values()), max(v.max() for v in nll.values()), 61).numpy()
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for who, values in nll.items():
        ax.hist(values.numpy(), bins=bins, alpha=0.55, label=f"{who}: mean {values.mean():.2f}")
    ax.set_xlabel("NLL under the oracle, nats per token (lower: more like the oracle's data)")
    ax.set_ylabel(f"sequences (of {n} each)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    s = Section(name)
    s.parts.append(command_block(f"python docs/gallery.py --only {name}",
                                 f"python -m zoo.predict {name} n=5 seed={SEED}   # G's samples, as token ids"))
    s.parts.append(picture(save(fig, f"{name}_nll"), f"{name} NLL histogram",
                           f"{n} sequences from each of: the oracle (the synthetic data's LSTM); SeqGAN's generator "
                           f"(`model.generate({n}, seed={SEED})`); the same G as it was after MLE pre-training, before "
                           "adversarial training (`model.gen_mle`, kept in the weights); an untrained G, initialised "
                           "as for the card's `test/nll_oracle_random`. Each sequence scored by the oracle: "
                           "NLL-oracle, the paper's measure"))
    m = card_of(name)["metrics"]
    s.parts.append(f"The card's means over its own test samples (nats per token), beside the legend's: the oracle's "
                   f"floor {m['test/nll_oracle_floor']:.2f}, the trained G {m['test/nll_oracle']:.2f}, "
                   f"G after MLE pre-training {m['test/nll_oracle_mle']:.2f}, "
                   f"an untrained G {m['test/nll_oracle_random']:.2f}.")
    rows = ["| oracle's samples (token ids) | SeqGAN's samples (token ids) |", "|---|---|"]
    oracle_rows, g_rows = list(samples.values())[:2]
    for a, b in zip(oracle_rows[:5].tolist(), g_rows[:5].tolist()):
        rows.append(f"| `{' '.join(map(str, a))}` | `{' '.join(map(str, b))}` |")
    s.parts.append("\n".join(rows))
    return s


def skipgram(name: str) -> Section:
    from zoo.models.skipgram.plots import embedding_map

    model = zoo.load(name)
    probes = ["g00a", "g01b", "g03c", "g07a", "fn00"]
    table = ["| word | nearest neighbours (cosine) |", "|---|---|"]
    for line in model.neighbour_table(probes, topn=6).split("\n"):
        word, _, rest = line.partition(": ")
        table.append(f"| `{word}` | {rest} |")
    groups = model.data_info.get("word_groups")  # planted group of each word (-1: a function word)
    fig = embedding_map(model.vectors, model.words, groups, n=200)
    some = [i for i, g in enumerate(groups) if 0 <= g < 6]  # the content words of groups 0-5
    fig_groups = embedding_map(model.vectors[some], [model.words[i] for i in some], [groups[i] for i in some],
                               n=len(some))
    s = Section(name)
    s.parts.append(command_block(f"python docs/gallery.py --only {name}",
                                 f"python -m zoo.predict {name} {' '.join(probes)} topn=6   # the table"))
    s.parts.append("Neighbours (`model.neighbour_table(words, topn=6)`): content words are `gGGf` (group GG, form f); "
                   "words of one planted group share contexts, so a good embedding puts them next to each other.\n\n"
                   + "\n".join(table))
    s.parts.append(picture(save(fig_groups, f"{name}_groups"), f"{name} planted groups",
                           "the content words of six planted groups (`g00*` to `g05*`, four forms each), first two "
                           "principal components of their vectors: each group is its own cluster"))
    s.parts.append(picture(save(fig, f"{name}_pca"), f"{name} PCA",
                           "all 180 words (`embedding_map`, as training draws it): over 40 groups the first two "
                           "components split the words by their form (the last letter) and set the function words "
                           "`fnNN` apart (grey crosses); groups 0 to 9 each have their own colour (the legend), the "
                           "other 30 groups are light grey. Inside a form's cluster the groups mix: the six-group "
                           "picture above separates them"))
    return s


def ood_scores(model, dm) -> tuple[dict, dict]:
    """Scores of the test digits and of each OOD test set, per detector (msp, odin, energy)."""
    x_in = dm.parts["test"][0]
    detectors = ("msp", "odin", "energy")
    scores_in = {d: model.detector_score(x_in, d) for d in detectors}
    scores_out = {name: {d: model.detector_score(x, d) for d in detectors} for name, x in dm.parts["test_ood"].items()}
    return scores_in, scores_out


def toy2d_map(mode: str) -> tuple[object, str]:
    """The 2-D toy's confidence map from a run of its recipe (trained here: no released weights)."""
    from zoo.loading import load_any
    from zoo.models.ood.plots import confidence_map
    from zoo.train import main as train

    args = [f"model.mode={mode}", f"seed={SEED}", "trainer.enable_progress_bar=false", "test_after_fit=false",
            "logger=[csv]"]
    with tempfile.TemporaryDirectory() as tmp:
        code = train(["recipe=ood_toy2d", *args, f"run_dir={tmp}"])
        if code != 0:
            raise SystemExit(f"training the toy (model.mode={mode}) failed with exit status {code}")
        (ckpt,) = Path(tmp).glob("ood_toy2d/*/checkpoints/last.ckpt")
        model, info = load_any(str(ckpt))
    model.eval()
    torch.manual_seed(SEED)
    with torch.no_grad():
        fake = model.generate(256) if mode != "ce" else None  # (256, 2) G's samples
    points = test_data(info["data"]).parts["train"]  # the run's training points (x (N, 2), y (N,))
    command = f"python -m zoo.train recipe=ood_toy2d {' '.join(args)}"
    return confidence_map(model.classifier, points, fake, mode), command


OOD_DETECTORS = {"msp": "max-softmax", "odin": "ODIN", "energy": "energy", "mahalanobis": "Mahalanobis"}


def ood_table(card: dict, sets: list[str]) -> str:
    """The card's test TNR@TPR95 of every detector on every OOD set (a set or detector it has no number for: -)."""
    metrics = card.get("metrics", {})
    rows = [f"| {s} | " + " | ".join(f"{metrics[k]:.3f}" if (k := f"test/{s}/{d}/tnr95") in metrics else "-"
                                      for d in OOD_DETECTORS) + " |" for s in sets]
    header = "| TNR@TPR95 (test, the card) | " + " | ".join(OOD_DETECTORS.values()) + " |"
    return "\n".join([header, "|---|" + "---|" * len(OOD_DETECTORS), *rows])


def ood(name: str) -> Section:
    from zoo.models.ood.plots import roc_curves, scored_examples

    model = zoo.load(name)
    dm = test_data(card_of(name)["data"])
    scores_in, scores_out = ood_scores(model, dm)
    sets = list(scores_out)
    s = Section(name)
    s.parts.append(command_block(f"python docs/gallery.py --only {name}",
                                 f"python -m zoo.evaluate {name} plots_dir=plots   # the same curves, and the numbers"))
    s.parts.append(picture(save(roc_curves(scores_in, scores_out, columns=3), f"{name}_roc"), f"{name} ROC",
                           f"ROC curves on the digits' test split against each out-of-distribution test set "
                           f"({', '.join(sets)}), one curve per detector (`model.detector_score(x, detector)`): "
                           "max-softmax (msp, blue, drawn first: ODIN's orange curve covers it where the two agree), "
                           "ODIN and energy; the dashed line is TPR 95 %. The Mahalanobis detector the description "
                           "names is scored by `zoo.evaluate` (the table below), not drawn here"))
    images = {"digits (in)": dm.parts["test"][0], **dm.parts["test_ood"]}
    msp = {"digits (in)": scores_in["msp"], **{k: v["msp"] for k, v in scores_out.items()}}
    threshold = float(model.msp_threshold)
    s.parts.append(picture(save(scored_examples(images, msp, threshold), f"{name}_sets"), f"{name} on each set",
                           "the first 8 test images of the digits and of each OOD set, a row each, as the model sees "
                           f"them (8x8), titled with the model's max-softmax: green where `detect` accepts the image "
                           f"as a digit (at or above the threshold {threshold:.3f}, which accepts 95 % of the "
                           "validation digits), red where it rejects it. The near-OOD sets are rotated digits "
                           "(rot90), the pixelwise mean of two digits of different classes (blends) and letters "
                           "drawn by Pillow's font (letters)"))
    s.parts.append(ood_table(card_of(name), sets))
    if name.endswith("joint"):
        s.parts.append("**The paper's 2-D toy** has no released weights: the gallery trains its recipe (seconds) with "
                       "the cross-entropy baseline and with the joint confidence loss, and draws the two maps.")
        for mode, what in (("ce", "the cross-entropy baseline"), ("joint", "the joint confidence loss")):
            fig, command = toy2d_map(mode)
            s.parts.append(command_block(command))
            s.parts.append(picture(save(fig, f"ood-toy2d-{mode}_confidence"), f"2-D toy, {mode}",
                                   f"{what} on the 2-D toy (`model.mode={mode}`, the command above): the "
                                   "classifier's max-softmax over the plane and the two classes' training points"
                                   + (", with G's samples (crosses)" if mode != "ce" else "")))
        s.parts.append("Both maps are confident far from the data (yellow towards the plane's edges): trained jointly, "
                       "G's samples stay on or between the classes, so the paper's picture, low confidence away from "
                       "the classes, is not reproduced by this recipe. The two-stage recipe `ood_toy2d_boundary` "
                       "reproduces it (a picture from [the OOD page](ood.md#results), not redrawn by the gallery: "
                       "`python -m zoo.train recipe=ood_toy2d_boundary seed=0`, ~40 s on one thread):")
        s.parts.append(picture("img/ood_toy2d_boundary.png", "2-D toy, boundary_gan",
                               "the two-stage `ood_toy2d_boundary` (`model.mode=boundary_gan`): a classifier trained "
                               "with the confidence loss, then frozen while G learns; G's samples (crosses) ring each "
                               "class on the edge of its confident region"))
    return s


def maml(name: str) -> Section:
    from zoo.models.maml.plots import sinusoid_adaptation

    model = zoo.load(name)
    s = Section(name)
    s.parts.append(command_block(f"python docs/gallery.py --only {name}",
                                 *[f"python -m zoo.predict {name} seed={t} steps=10 out=task{t}.png"
                                   for t in (0, 1, 2)]))
    figures = [sinusoid_adaptation(model, seed=t, steps=(0, 1, 10)) for t in (0, 1, 2)]
    s.parts.append(picture(save(figures, f"{name}_tasks"), f"{name} on three new tasks",
                           "three new sines (seeds 0, 1, 2; `model.adapt(x, y, steps)` on their 10 points): the "
                           "meta-learned start (pre-update) and the fits after 1 and 10 gradient steps"))
    return s


KINDS = {"vae": vae, "dvae": vae, "sat": captioning, "seqgan": seqgan, "skipgram": skipgram, "ood": ood,
         "maml": maml}  # a card's "model" -> its section


def section_text(s: Section) -> str:
    return f"## `{s.name}`\n\n{zoo.list_pretrained()[s.name]}\n\n" + "\n\n".join(s.parts) \
        + "\n\n" + card_block(card_of(s.name)) + "\n"


HEADER = """# Gallery

Every released model (`zoo.list_pretrained()`), loaded from its weights (`zoo.load(name)`) and drawn with its own
plot functions. `make gallery` (or `python docs/gallery.py`) makes every picture on this page and the page itself
(about 2 minutes on 2 CPU cores); each section shows the command that makes its pictures alone, the model's own
command for the same thing where it has one, and the card of the weights. The code: `docs/gallery.py`.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="released models to redraw (default: all)")
    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    order = list(KINDS)  # the README's order of the models
    released = sorted(zoo.list_pretrained(), key=lambda n: (order.index(card_of(n)["model"]), n))
    wanted = args.only or released
    unknown = [n for n in wanted if n not in released]
    if unknown:
        print(f"not released: {unknown}; released: {released}", file=sys.stderr)
        return 2
    old = {}  # the sections of the models not redrawn, from the page as it is
    if PAGE.exists():
        for chunk in PAGE.read_text().split("\n## `")[1:]:
            old[chunk.split("`", 1)[0]] = "## `" + chunk.rstrip("\n") + "\n"
    sections = []
    for name in released:
        if name in wanted:
            print(f"drawing {name}", flush=True)
            sections.append(section_text(KINDS[card_of(name)["model"]](name)))
        elif name in old:
            sections.append(old[name])
        else:
            print(f"{name} is not on the page yet: python docs/gallery.py --only {name}", file=sys.stderr)
    PAGE.write_text(HEADER + "\n" + "\n".join(sections))
    linked = set(re.findall(r"\]\(gallery/([^)]+\.png)\)", PAGE.read_text()))
    for stale in (p for p in OUT.glob("*.png") if p.name not in linked):  # pictures of an older page
        stale.unlink()
    print(f"wrote {PAGE.relative_to(ROOT)} and {len(list(OUT.glob('*.png')))} pictures in {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
