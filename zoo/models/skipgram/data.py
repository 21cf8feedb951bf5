"""Datamodules: any text files (text8, a glob, a list) or the generated planted corpus.

Training batches are chunks of the encoded corpus (see ``corpus.CorpusChunks``); validation and
test "batches" are whole evaluation sets (word pairs with scores, analogy questions) given as
words, so a model looks them up in its own vocabulary and ``zoo.evaluate`` of a finished model
needs only the evaluation files, not the corpus.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from torch.utils.data import DataLoader

from zoo.core.data import ResumableLoader, ZooDataModule
from zoo.core.downloads import fetch
from zoo.errors import UserError
from zoo.models.skipgram import corpus as C
from zoo.models.skipgram.config import (
    SKIPGRAM_SYNTHETIC_SPEC,
    SKIPGRAM_TEXT_SPEC,
    PlantedCorpus,
)
from zoo.models.skipgram.evaluation import read_analogies, read_similarity
from zoo.models.skipgram.synthetic import generate
from zoo.paths import readable


def _set_name(path: Path, split: str) -> str:
    """Metric name of an evaluation file: its stem, without a _val/_test suffix."""
    name = path.stem.replace("-", "_")
    return name[: -len(split) - 1] if name.endswith(f"_{split}") else name


NO_VAL_SIMILARITY = ("data.val_similarity is empty: give at least one word-similarity file (WordSim353 / "
                     "SimLex-999 format); its Spearman is the validation metric")


class TextCorpusData(ZooDataModule):
    """Text files streamed from disk (text8 by default); wordsim353 / simlex999 / analogies."""

    spec = SKIPGRAM_TEXT_SPEC

    def __init__(self, cfg: dict):
        super().__init__(cfg)
        self.folder: Path | None = None
        self.train_set: C.CorpusChunks | None = None
        self.eval_sets: dict[str, list[dict]] = {}

    # the two things a subclass changes
    def corpus_files(self) -> list[Path]:
        """The corpus files; a missing path named text8 or text8.zip is fetched into its folder first (here,
        not in prepare_data: testing a finished model needs no corpus)."""
        try:
            return C.resolve_files(self.cfg.files, "corpus")
        except UserError as missing:
            specs = [self.cfg.files] if isinstance(self.cfg.files, str) else list(self.cfg.files)
            text8 = [Path(str(s)) for s in specs if Path(str(s)).name in ("text8", "text8.zip")
                     and not Path(str(s)).exists()]
            if not text8:
                raise
            fetch("text8", text8[0].parent, self.cfg.download, missing)
            return C.resolve_files(self.cfg.files, "corpus")

    def eval_files(self) -> dict[str, tuple[list, list]]:
        """{stage: (similarity files, analogy files)}; the first val similarity file is the monitor."""
        return {"val": (list(self.cfg.val_similarity), list(self.cfg.val_analogies)),
                "test": (list(self.cfg.test_similarity), list(self.cfg.test_analogies))}

    def prepare_data(self) -> None:
        pass  # the corpus is only needed to train (setup("fit") says how to get it when missing);
        # testing a finished model reads just the evaluation files

    def setup(self, stage: str | None = None) -> None:
        stage = getattr(stage, "value", stage)  # Lightning passes a TrainerFn (a str enum)
        files = self.eval_files()
        if stage in (None, "fit") and self.train_set is None:
            cfg = self.cfg
            self._check_test_files(*files.get("test", ([], [])))
            if "val" in files and not files["val"][0]:  # else found by _load_eval after the corpus is cached
                raise UserError(NO_VAL_SIMILARITY)
            self.folder = C.build_corpus(self.corpus_files(), Path(cfg.root) / "skipgram_cache",
                                         cfg.min_count, cfg.max_vocab, cfg.max_sentence_length,
                                         cfg.read_chars, cfg.lowercase, cfg.strip_punctuation)
            self.words, counts, self.meta = C.load_corpus(self.folder)
            self.counts = counts.tolist()
            self.train_set = C.CorpusChunks(self.folder / "ids.bin", self.meta["n_ids"], counts,
                                            cfg.chunk_tokens, cfg.window, cfg.sample, cfg.seed)
        for split in (["val"] if stage == "fit" else ["val", "test"] if stage is None else [stage]):
            if split in files and split not in self.eval_sets:
                self.eval_sets[split] = self._load_eval(split, *files[split])

    @staticmethod
    def _check_test_files(similarity: list, analogies: list) -> None:
        """The test split's files are read after training: a missing, unreadable or malformed one is
        refused before it (they are small: parsed twice)."""
        for specs, what, read in ((similarity, "similarity file", read_similarity),
                                  (analogies, "analogy file", read_analogies)):
            for path in C.resolve_files(specs, what) if specs else []:
                readable(path)
                read(path)

    def _load_eval(self, split: str, similarity: list, analogies: list) -> list[dict]:
        if split == "val" and not similarity:
            raise UserError(NO_VAL_SIMILARITY)
        sets = []
        for i, path in enumerate(C.resolve_files(similarity, "similarity file") if similarity else []):
            sets.append({"kind": "similarity", "name": _set_name(path, split), "primary": i == 0,
                         "pairs": read_similarity(path), "lowercase": self.cfg.eval_lowercase})
        for path in C.resolve_files(analogies, "analogy file") if analogies else []:
            sets.append({"kind": "analogy", "name": _set_name(path, split), "primary": False,
                         "sections": read_analogies(path), "lowercase": self.cfg.eval_lowercase})
        return sets

    def info(self) -> dict:
        if self.train_set is None:
            raise RuntimeError("call setup('fit') before info()")
        return {"vocab": self.words, "counts": self.counts, "window": self.cfg.window,
                "train_words": int(self.meta["train_words"]), "lowercase": self.cfg.lowercase}

    def set_epoch(self, epoch: int) -> None:
        if self.train_set is not None:
            self.train_set.epoch = epoch

    def train_dataloader(self) -> DataLoader:
        # Lightning cautions that workers may each yield the whole dataset; CorpusChunks shares its chunks
        # among them. A warning on every run, and the end of one under PYTHONWARNINGS=error
        warnings.filterwarnings("ignore", message="Your `IterableDataset` has `__len__` defined")
        return ResumableLoader(self.train_set, batch_size=None, num_workers=self.cfg.num_workers)

    def _eval_loader(self, split: str) -> DataLoader:
        if split not in self.eval_sets:
            self.setup(split)
        return DataLoader(self.eval_sets[split], batch_size=None, collate_fn=lambda x: x)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")


class SyntheticCorpusData(TextCorpusData):
    """Generated corpus with planted word groups; ground-truth similarity and analogy files."""

    spec = SKIPGRAM_SYNTHETIC_SPEC

    def __init__(self, cfg: dict):
        super().__init__(cfg)
        self.spec = PlantedCorpus(**{"seed": self.cfg.seed, **dict(self.cfg.planted)})  # checked by the Config
        self.generated: Path | None = None

    def _generated(self) -> Path:
        if self.generated is None:  # the spec's ranges are checked with the config (SyntheticCorpusConfig)
            self.generated = generate(self.spec, self.cfg.root)
        return self.generated

    def corpus_files(self) -> list[Path]:
        return [self._generated() / "corpus.txt"]

    def eval_files(self) -> dict[str, tuple[list, list]]:
        folder = self._generated()
        return {"val": ([str(folder / "planted_val.tsv")], list(self.cfg.val_analogies)),
                "test": ([str(folder / "planted_test.tsv")],
                         [str(folder / "planted_analogies.txt")] if self.cfg.test_analogies else [])}

    def info(self) -> dict:
        groups = json.loads((self._generated() / "groups.json").read_text())
        return {**super().info(), "word_groups": [groups.get(w, -1) for w in self.words]}
