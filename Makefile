# One-command entry points; each sets up .venv by itself on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup lab run verify test ci lint typecheck browser unit slow nbval nbval-laptop nbval-colab nbval-colab-tpu refresh colab doctor compare wheelhouse runtimes clean

# Jupyter refuses to start as root ("Running as root is not recommended") unless told; in
# containers, CI images and cloud VMs root is the only user, so pass --allow-root there.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
# extra JupyterLab options for make lab, e.g. LAB_ARGS="--no-browser --port=8899"
LAB_ARGS ?=

setup: $(STAMP)

# Offline install when wheelhouse/ holds wheels (`make wheelhouse` on a machine with network).
WHEELS := $(if $(wildcard wheelhouse/*.whl),--no-index --find-links wheelhouse,)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt $(WHEELS) -e ".[dev]"
	@touch $(STAMP)

# A learner's install: the course and JupyterLab, without the maintainers' dev extras.
LAB_STAMP := $(VENV)/.installed-lab
$(LAB_STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt $(WHEELS) -e ".[lab]"
	@touch $(LAB_STAMP)

lab: $(LAB_STAMP)  ## start JupyterLab on notebooks/ (kernel = this venv; nothing registered globally)
	@$(if $(ROOT_FLAG),echo "running as root (a container or VM): starting JupyterLab with --allow-root",:)
	JUPYTER_PATH=$(CURDIR)/$(VENV)/share/jupyter $(VENV)/bin/jupyter lab --notebook-dir=notebooks $(ROOT_FLAG) $(LAB_ARGS)

run: $(STAMP)  ## execute every notebook headless into build/ and write the summary
	$(PY) tools/run_notebooks.py --out build

verify: $(STAMP)  ## nbval over every notebook -> verified/<hardware class>.json + README table
	$(PY) tools/verify.py

# `make test` is the maintainer's loop (target: under 10 min on CI's 2-core CPU): lint, types,
# the fast unit tests and nbval over every notebook. `make ci` (what CI runs) adds the slow unit
# tests (they start processes: seconds each, about 5 min together), the browser checks and the two
# second passes (the laptop class emulated, Colab's package versions). The browser checks run when
# `make browser` has installed chromium and Playwright (they skip otherwise); `make ci` installs them.
test: lint typecheck unit nbval  ## lint, types, fast unit tests, nbval

# `make ci` runs the steps of `make test`, `make slow` and the two second passes in an order that
# keeps the timed passes quiet: the installs that wait on the network and the disk (`make browser`,
# the Colab venv; tools/colab_runtime.py needs only the standard library) run in the background
# beside the course's own install, lint, types and the fast units; the slow tests start
# once the browser is there; nbval and the laptop and Colab passes start after every install has
# finished, so no timed claim shares the CPU with pip. Their logs: build/browser.log, build/colab-venv.log.
ci:  ## what CI runs (.ci/run): browser lint typecheck unit slow nbval nbval-laptop nbval-colab
	@mkdir -p build
	@{ $(MAKE) --no-print-directory browser >build/browser.log 2>&1 & browser=$$!; \
	  $(PYTHON) tools/colab_runtime.py venv $(COLAB_RUNTIME) >build/colab-venv.log 2>&1 & colab=$$!; \
	  $(MAKE) --no-print-directory lint typecheck unit; rc=$$?; \
	  wait $$browser; cat build/browser.log; \
	  if [ $$rc = 0 ]; then $(MAKE) --no-print-directory slow; rc=$$?; fi; \
	  wait $$colab || { echo "the Colab venv did not build (build/colab-venv.log):"; \
	    tail -30 build/colab-venv.log; rc=1; }; \
	  if [ $$rc = 0 ]; then $(MAKE) --no-print-directory nbval nbval-laptop nbval-colab; rc=$$?; fi; \
	  exit $$rc; }

lint: $(STAMP)
	$(VENV)/bin/ruff check accelkit tests tools notebooks

typecheck: $(STAMP)  ## mypy over accelkit/ (settings in pyproject.toml)
	$(PY) -m mypy

unit: $(STAMP)  ## the fast unit tests (under a minute); `make slow` runs the ones that start processes
	$(PY) -m pytest -q -m "not slow" tests

slow: $(STAMP)  ## unit tests that start processes, kernels or compilers (seconds each)
	ACCELKIT_PLAYWRIGHT_PYTHON=$${ACCELKIT_PLAYWRIGHT_PYTHON:-$$([ -x $(PW_PY) ] && echo $(CURDIR)/$(PW_PY) || echo $(PY))} \
	  $(PY) -m pytest -q -m slow tests

# The browser checks (tools/browser_check.py; slow tests that skip without these): Debian's
# chromium (installed only as root, with apt-get) and Playwright in its own venv, pinned.
PW_VENV := build/playwright-venv
PW_PY := $(PW_VENV)/bin/python
browser:  ## best effort: chromium and Playwright for the browser checks (they skip without)
	@mkdir -p build
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  { timeout 600 apt-get install -y -q chromium || { timeout 300 apt-get update -q \
	    && timeout 600 apt-get install -y -q chromium; }; } >build/chromium-install.log 2>&1 \
	  || echo "chromium did not install (build/chromium-install.log): the browser checks skip"; fi
	@{ [ -x $(PW_PY) ] || $(PYTHON) -m venv $(PW_VENV); } \
	  && timeout 600 $(PW_PY) -m pip install --quiet --disable-pip-version-check \
	    -c constraints.txt playwright >build/playwright-install.log 2>&1 \
	  || echo "playwright did not install (build/playwright-install.log): the browser checks skip"

# Each timed claim's interval goes to build/claims.jsonl; the margins table is printed after
# the run, passed or failed, so a CI log shows how close every floor came (tools/claim_margins.py).
# An absolute path: each notebook's kernel runs in notebooks/.
CLAIMS_LOG := $(CURDIR)/build/claims.jsonl
nbval: $(STAMP)
	@mkdir -p build && rm -f $(CLAIMS_LOG)
	ACCELKIT_PROFILE=ci ACCELKIT_CLAIMS_LOG=$(CLAIMS_LOG) $(PY) -m pytest -q --durations=8 --nbval-lax \
	  --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg -p no:cacheprovider \
	  notebooks; rc=$$?; $(PY) tools/claim_margins.py $(CLAIMS_LOG); exit $$rc

# The timing-sensitive notebooks once more, computing and deciding as a laptop CPU without bf16
# units (AVX2 only): ACCELKIT_HARDWARE caps oneDNN/ATen to that instruction set (README,
# "Hardware classes"). Writes its record to build/, not verified/. 06 is left out: as cpu-avx2
# it needs minutes (a cold GPT compile and a for-loop AdamW that is slow with AVX2), far over
# its budget; run it with LAPTOP_NB="06_" when you have the time.
LAPTOP_CLASS ?= cpu-avx2
LAPTOP_NB    ?= 00_ 02_ 03_
LAPTOP_LOG    := $(CURDIR)/build/claims-$(LAPTOP_CLASS).jsonl
# On a CPU that is this class already (an AVX2-only Zen 3), `make nbval` ran it natively: skipped.
NATIVE_CLASS = $(shell $(PY) -c 'from accelkit import hardware; print(hardware.probed_cpu().name)' 2>/dev/null)
nbval-laptop: $(STAMP)
	@mkdir -p build && rm -f $(LAPTOP_LOG)
	@if [ "$(NATIVE_CLASS)" = "$(LAPTOP_CLASS)" ]; then \
	  echo "nbval-laptop: this CPU is $(LAPTOP_CLASS) itself; make nbval already ran that class natively"; \
	else ACCELKIT_HARDWARE=$(LAPTOP_CLASS) ACCELKIT_CLAIMS_LOG=$(LAPTOP_LOG) $(PY) tools/verify.py \
	  --profile ci --only $(LAPTOP_NB) --out build/verify-$(LAPTOP_CLASS) --readme ''; \
	  rc=$$?; $(PY) tools/claim_margins.py $(LAPTOP_LOG); exit $$rc; fi

# Every notebook under Colab's own package versions (colab_runtimes.toml: torch, TensorFlow,
# Keras, JAX as Colab preinstalls them, accelkit installed over them as the bootstrap does), in
# build/colab-<runtime>-venv (tools/colab_runtime.py; rebuilt only when the table changes).
# Installed without byte-compiling: the kernels write the .pyc of what they import, so
# PYTHONDONTWRITEBYTECODE (set in some CI images) is cleared for this pass.
# The GPU runtime's set is part of make ci; the TPU runtime's (no TensorFlow) is run by hand.
COLAB_RUNTIME ?= gpu
COLAB_LOG = $(CURDIR)/build/claims-colab-$(COLAB_RUNTIME).jsonl
nbval-colab: $(STAMP)
	@mkdir -p build && rm -f $(COLAB_LOG)
	$(PY) tools/colab_runtime.py venv $(COLAB_RUNTIME)
	ACCELKIT_PROFILE=ci ACCELKIT_CLAIMS_LOG=$(COLAB_LOG) PYDEVD_DISABLE_FILE_VALIDATION=1 PYTHONDONTWRITEBYTECODE= \
	  $$($(PY) tools/colab_runtime.py python $(COLAB_RUNTIME)) \
	  -m pytest -q --durations=8 --nbval-lax --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg \
	  -p no:cacheprovider notebooks; rc=$$?; $(PY) tools/claim_margins.py $(COLAB_LOG); exit $$rc

nbval-colab-tpu:
	$(MAKE) nbval-colab COLAB_RUNTIME=tpu

refresh: $(STAMP)  ## maintainers: re-execute notebooks IN PLACE (ci profile) to store outputs
	$(PY) tools/refresh_notebooks.py $(NB)

colab: $(STAMP)  ## regenerate the Open-in-Colab badges and bootstrap cells from pyproject's URL
	$(PY) tools/colab.py --write

# Runs to compare: results.json files, build/ folders, verified/<class>.json records, or a folder
# of hand-ins. Writes build/compare/compare.md and compare.html (plots embedded).
RUNS ?= build $(wildcard verified/*.json)
compare: $(STAMP)  ## the same result keys across machines: make compare RUNS="build hand_ins/"
	$(PY) tools/compare.py $(RUNS) --out build/compare

wheelhouse:  ## instructors: download the pinned set for PLATFORM / PYVER into wheelhouse/
	$(PYTHON) tools/setup_course.py wheelhouse $(if $(PLATFORM),--platform $(PLATFORM)) $(if $(PYVER),--python-version $(PYVER))

runtimes: $(STAMP)  ## run times in README, notebook headers and TEACHING.md from verified/cpu-avx512-bf16.json
	$(PY) tools/runtimes.py --write
	$(PY) tools/teaching.py --write

doctor: $(STAMP)
	$(PY) -m accelkit.env

clean:
	rm -rf build
