"""Print pip constraints that pin every dependency in pyproject.toml to its lower bound (``x>=1.2`` ->
``x==1.2``), extras included: `make test-oldest` installs with them, so the bounds we declare are the
versions the suite was run on. Dependencies without a lower bound are left to pip (the newest)."""

import re
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    sys.exit("make test-oldest needs Python 3.11 or later (tomllib)")

project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
specs = project["dependencies"] + [s for extra in project.get("optional-dependencies", {}).values() for s in extra]
for spec in specs:
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*(?:==|>=)\s*([0-9][^,;\s]*)", spec)
    if match:
        print(f"{match[1]}=={match[2]}")
