"""The seed spreads of ``zoo.spread``, under the name the benchmarks import (``from spread import ...``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's zoo, run from anywhere
from zoo.spread import fmt, median_range, paired, spread  # noqa: E402

__all__ = ["fmt", "median_range", "paired", "spread"]
