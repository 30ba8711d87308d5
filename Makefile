# mxnet-gc: `make install` builds .venv/ with everything; `make test` installs, then runs the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: install data test bench clean

# Reinstalls when the requirements, setup.py or the C++ sources change.
$(VENV)/.installed: requirements.txt constraints.txt setup.py $(wildcard src_cpp/*)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip setuptools wheel
	$(PIP) install --quiet -c constraints.txt -r requirements.txt
	$(PIP) install --quiet --no-build-isolation -c constraints.txt -e .
	touch $@

install: $(VENV)/.installed

# Fashion-MNIST, offline, from Debian's package (needs root; elsewhere set FASHION_MNIST_DIR).
FASHION_MNIST := /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
data:
	@test -f $(FASHION_MNIST) -o -n "$$FASHION_MNIST_DIR" || { apt-get update -q && apt-get install -y -q dataset-fashion-mnist; }

test: install data
	$(PY) -m pytest -q tests

bench: install
	$(PY) tools/bench_codecs.py

clean:
	rm -rf build $(VENV) *.egg-info mxnet_gc/*.so
