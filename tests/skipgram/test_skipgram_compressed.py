"""Corpora as users have them: compressed (gzip, bzip2, xz, a zip of one file, as gensim's LineSentence
reads .gz and .bz2) read as their text; damaged archives, zips of several files and files that are not
text refused with a UserError that names the file, leaving no cache behind. A gzip file must not be
read as its compressed bytes: a vocabulary of single letters, and a run that "succeeds"."""

import bz2
import gzip
import lzma
import zipfile

import numpy as np
import pytest

from zoo.core.files import compression
from zoo.errors import UserError
from zoo.models.skipgram.corpus import build_corpus, read_sentences

# a long line (several read blocks), a word cut by a block end, non-ASCII words, a line with no end
TEXT = ("the cat sat on the mat\n" * 40 + " ".join(f"w{i % 37}" for i in range(500)) + "\n"
        + "élan vital über alles the end\n" * 5 + "last line no newline")


def write_compressed(path, kind: str, text: str = TEXT) -> None:
    data = text.encode("utf-8")
    if kind == "zip":
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("corpus.txt", data)
    else:
        path.write_bytes({"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}[kind](data))


@pytest.mark.parametrize("kind", ["gzip", "bzip2", "xz", "zip"])
def test_compressed_corpus_reads_and_encodes_as_its_text(tmp_path, kind):
    plain = tmp_path / "plain.txt"
    plain.write_text(TEXT, encoding="utf-8")
    packed = tmp_path / "corpus.data"  # no telling suffix: the format is read from the first bytes
    write_compressed(packed, kind)
    assert compression(packed) == kind and compression(plain) is None
    for read_chars in (7, 1 << 20):  # blocks that cut words and lines, and one block
        assert list(read_sentences([packed], 50, read_chars)) == list(read_sentences([plain], 50, read_chars))
    a = build_corpus([plain], tmp_path / "cache", min_count=2)
    b = build_corpus([packed], tmp_path / "cache", min_count=2)
    assert a != b  # two cache entries (the key is the file), with the same contents
    for name in ("ids.bin", "counts.npy", "tokenizer.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert np.fromfile(b / "ids.bin", dtype=np.int32).size > 700  # 774 words and the sentence ends


def test_damaged_archive_is_a_user_error_and_leaves_no_cache(tmp_path):
    whole = gzip.compress(TEXT.encode() * 50)
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(whole[: len(whole) // 2])  # a download stopped half way
    with pytest.raises(UserError, match=r"cut.txt.gz is gzip-compressed but cannot be read to its end"):
        build_corpus([cut], tmp_path / "data" / "cache", min_count=1)
    assert not (tmp_path / "data").exists()
    bad_zip = tmp_path / "bad.zip"
    bad_zip.write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(UserError, match=r"bad.zip is zip-compressed but cannot be read"):
        list(read_sentences([bad_zip]))


def test_zip_made_on_a_mac_reads_its_one_text_file(tmp_path):
    """Finder's zips add __MACOSX/._NAME resource forks beside the file: not a second file."""
    path = tmp_path / "text8.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("text8", "one two three\n")
        archive.writestr("__MACOSX/._text8", b"\x00\x05\x16\x07 resource fork")
    assert list(read_sentences([path])) == [["one", "two", "three"]]


def test_zip_of_several_files_is_refused_with_their_names(tmp_path):
    path = tmp_path / "two.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a.txt", "one two\n")
        archive.writestr("b.txt", "three four\n")
    with pytest.raises(UserError, match=r"(?s)two.zip is a zip of 2 files: .*unzip.*\n  it holds a.txt, b.txt"):
        list(read_sentences([path]))


def test_files_that_are_not_text_are_refused_latin1_is_read(tmp_path):
    binary = tmp_path / "weights.bin"
    binary.write_bytes(np.random.default_rng(0).integers(0, 256, 20_000, dtype=np.uint8).tobytes())  # seed 0
    with pytest.raises(UserError, match=r"weights.bin is not UTF-8 text \(\d+% control codes.*data.files"):
        build_corpus([binary], tmp_path / "data" / "cache", min_count=1)
    assert not (tmp_path / "data").exists()
    utf16 = tmp_path / "notepad.txt"
    utf16.write_text("the cat sat on the mat\n" * 20, encoding="utf-16")  # ASCII with a zero byte each
    with pytest.raises(UserError, match=r"(?s)notepad.txt is not UTF-8 text.*iconv -f utf-16"):
        list(read_sentences([utf16]))
    compressed_binary = tmp_path / "weights.bin.gz"
    compressed_binary.write_bytes(gzip.compress(binary.read_bytes()))
    with pytest.raises(UserError, match="is not UTF-8 text"):
        list(read_sentences([compressed_binary]))
    latin1 = tmp_path / "latin1.txt"  # accented letters a few per cent: read, each as U+FFFD (with a warning)
    latin1.write_bytes("le café de la gare est fermé le dimanche\n".encode("latin-1") * 20)
    assert list(read_sentences([latin1]))[0][1] == "caf\ufffd"
