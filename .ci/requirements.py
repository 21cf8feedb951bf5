"""pyproject.toml's dependencies (extras included), two ways:

  python .ci/requirements.py oldest   pip constraints pinning each one to its lower bound (``x>=1.2`` ->
                                      ``x==1.2``): `make test-oldest` installs with them, so the bounds we
                                      declare are versions the suite has passed on
  python .ci/requirements.py check    the version installed here of each, and which fall outside the
                                      declared range: the GPU machine runs the zoo from its own packages,
                                      which pip never checked (benchmarks/gpu_check.sh install)
"""

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*([^;#]*)")


def requirements() -> list[tuple[str, str]]:
    """(name, version specifier) for every dependency and extra."""
    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] + [s for extra in project.get("optional-dependencies", {}).values() for s in extra]
    return [(m[1], m[2].strip()) for m in map(SPEC.match, specs) if m]


def oldest() -> None:
    for name, spec in requirements():
        low = re.search(r"(?:==|>=)\s*([0-9][^,\s]*)", spec)
        if low:
            print(f"{name}=={low[1]}")


def check() -> None:
    from packaging.specifiers import SpecifierSet  # pip's own; every environment that has pip has it

    outside = 0
    for name, spec in requirements():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            print(f"{name:16s} {'-':12s} {spec:14s} MISSING")
            outside += 1
            continue
        ok = SpecifierSet(spec).contains(version, prereleases=True)
        outside += not ok
        print(f"{name:16s} {version:12s} {spec:14s} {'ok' if ok else 'OUTSIDE the declared range'}")
    print(f"{outside} of the declared dependencies missing or outside their range")


if __name__ == "__main__":
    {"oldest": oldest, "check": check}[sys.argv[1] if len(sys.argv) > 1 else "check"]()
