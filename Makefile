# Two commands do everything on a fresh machine (Python 3.11, pip):
#   make demo   -> create .venv, install, train the default recipe (vae_digits, a couple of minutes on 2 CPU cores)
#   make test   -> create .venv if needed, install, run the test suite (under 8 minutes on 2 cores)
#   make test-slow -> the costly checks kept out of make test (CI runs both)
#   make test-gpu  -> every recipe on CUDA, fp32 and bf16-mixed (a machine with a GPU)
#   make test-oldest -> the suite on the lowest versions pyproject.toml allows (its ">=" bounds), in .venv-oldest
#   make test-newest -> the suite on the newest release of every dependency, in a fresh .venv-newest
#   make reproduce -> every pretrained card re-evaluated on its full test split against its numbers,
#                     and its recipe re-trained and checked against the seed spread on the card
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "torch==2.14.1" "torchvision==0.29.1"
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/python -m zoo.train recipe=vae_digits

# the suite on 2 worker processes (pytest-xdist), about half the time of one on the 2-core CI machine; an idle
# worker takes tests from the other's queue (worksteal), so one long test near the end leaves no worker idle;
# a single test file or test runs as usual with `.venv/bin/python -m pytest PATH`
test: install
	$(BIN)/python -m pytest -q -n 2 --dist worksteal

# the costly checks kept out of `make test` (marked slow); CI runs `make test test-slow`
test-slow: install
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -m slow

test-oldest:
	$(PYTHON) -m venv .venv-oldest
	.venv-oldest/bin/pip install -q --upgrade pip
	$(PYTHON) .ci/requirements.py oldest > .venv-oldest/constraints.txt
	.venv-oldest/bin/pip install -q -c .venv-oldest/constraints.txt -e ".[dev]"
	.venv-oldest/bin/python -m pytest -q -n 2

# the newest release of every dependency (pip install -U), whatever a machine-wide pip config caps: the venv's
# own pip.conf (which outranks /etc/xdg/pip) reads an empty constraints file; a big download (torch: ~3 GB)
test-newest:
	rm -rf .venv-newest
	$(PYTHON) -m venv .venv-newest
	printf '[global]\nconstraint = /dev/null\n' > .venv-newest/pip.conf
	.venv-newest/bin/pip install -q -U pip
	.venv-newest/bin/pip install -q -U -e ".[dev,hub]"
	.venv-newest/bin/pip list --format=freeze > .venv-newest/versions.txt
	.venv-newest/bin/python -m pytest -q -n 2

test-gpu: install
	$(BIN)/python -m pytest -q -m gpu

reproduce: install
	$(BIN)/python -m pytest -q -m reproduce

lint: install
	$(BIN)/ruff check zoo tests benchmarks studies

.PHONY: install demo test test-slow test-oldest test-newest test-gpu reproduce lint

# the documentation site (mkdocs.yml) into build/site, strictly: a broken link, a missing page or an unreadable
# docstring fails the build. It needs the docs extra only, not torch: mkdocstrings reads zoo's source files
# (griffe, statically) and imports nothing of it. In a .venv that `make install` made, the dev extra has them.
$(VENV)/.docs-installed: pyproject.toml | $(BIN)/activate
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['docs'], sep='\n')" > $(VENV)/docs-requirements.txt
	$(BIN)/pip install -q -r $(VENV)/docs-requirements.txt
	touch $@

docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# the gallery (docs/gallery.md, docs/gallery/*.png): pictures from every released model's weights
gallery: install
	OMP_NUM_THREADS=1 $(BIN)/python docs/gallery.py

# headless Chromium for tests/test_site.py: Debian's chromium and chromedriver (no browser download), installed
# where apt-get is and we are root (CI); elsewhere the test says how to install them and skips
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	else echo "make browser: no chromium and no root apt-get here; tests/test_site.py will skip"; fi

test: browser

.PHONY: docs gallery browser
