"""Paths as the records name them: a record names no folder of the machine it was made on."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout


def shown(path: str | Path) -> str:
    """``path`` from the checkout's root when it is inside the checkout, else its last part alone."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
