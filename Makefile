# mxnet-gc: `make install` builds .venv/ with everything; `make test` installs, then runs the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: install horovod data test test-fast docs demo bench bench-classic bench-emulation-check bench-emulated bench-emulated-targets bench-emulated-full bench-network bench-overlap bench-sparse study study-seeds study-resnet20 study-lgc study-lgc-seeds study-pareto bench-lgc asan clean

# Reinstalls when the requirements, setup.py or the C++ sources change.
$(VENV)/.installed: requirements.txt requirements-test.txt constraints.txt setup.py $(wildcard src_cpp/*)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip setuptools wheel
	$(PIP) install --quiet -c constraints.txt -r requirements-test.txt
	$(PIP) install --quiet --no-build-isolation -c constraints.txt -e .
	$(MAKE) horovod
	touch $@

install: $(VENV)/.installed

# Horovod with MXNet and Gloo (the second transport), built against the installed mxnet (no build
# isolation, which would hide mxnet from its build); about 3 minutes on 2 cores.  CMake 4 refuses the
# CMakeLists of the Gloo that Horovod 0.28.1 bundles, hence cmake < 4.
HOROVOD_BUILD := HOROVOD_WITH_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
	HOROVOD_WITHOUT_PYTORCH=1 PATH=$(abspath $(VENV))/bin:$$PATH
horovod:
	@$(PY) -c "import horovod.mxnet" 2>/dev/null || { \
	  $(PIP) install --quiet -c constraints.txt "cmake>=3.13,<4" packaging cloudpickle psutil pyyaml && \
	  $(HOROVOD_BUILD) $(PIP) install --quiet --no-build-isolation --no-cache-dir -c constraints.txt horovod==0.28.1; }

# Fashion-MNIST, offline, from Debian's package (needs root; elsewhere set FASHION_MNIST_DIR).
FASHION_MNIST := /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
data:
	@test -f $(FASHION_MNIST) -o -n "$$FASHION_MNIST_DIR" || { apt-get update -q && apt-get install -y -q dataset-fashion-mnist; }

# Every tier, in 2 processes (pytest-xdist): each test file's tests in one, so that a file's shared job (a
# module fixture) runs once; the files with the longest tiers first (tests/conftest.py).
test: install data
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder tests

# The inner loop: the unit tier only (in-process, no jobs; tests/conftest.py, pytest.ini), a few minutes.
test-fast: install data
	$(PY) -m pytest -q -m unit tests

# The API reference from the docstrings (Sphinx, numpy style), into docs/_build/api; warnings fail it.
docs: install
	$(PY) -m sphinx -W -q -b html docs/api docs/_build/api

# The main job: 2 workers and 1 server train a CNN on Fashion-MNIST with 4bit both ways (gradients pushed and
# their sum pulled 4bit-encoded) and per-layer threshold groups (about 5 minutes on 2 cores).
demo: install data
	$(PY) tools/launch.py -n 2 -s 1 --timeout 1800 $(PY) examples/train_fashion_mnist.py \
		--model cnn --compression 4bit --groups --compressed-pull --epochs 6 --lr-steps 4,5 --log demo_log.json

bench: install
	$(PY) -m tools.bench_codecs

# The network benchmark on namespaced, bandwidth-limited hosts (root; about 40 minutes on 2 cores):
# rewrites its section of lab/bench_network/findings.md, lab/bench_network/bench_network.csv and lab/bench_network/bench_network.png.
bench-network: install data
	$(PY) -m tools.bench_network --csv lab/bench_network/bench_network.csv --plot lab/bench_network/bench_network.png \
		--markdown lab/bench_network/findings.md

# The optimizer on the servers (a Module.fit-shaped job) at 100 Mbit/s (root; about 5 minutes): MXNet's dist_sync
# against MXNet's 2bit, 4bit pushes and 4bit both ways on mxnet_gc's store; README's first table and a section
# of lab/bench_network/findings.md.
bench-classic: install data
	$(PY) -m tools.bench_network --models fmnist-cnn --modes none classic-2bit classic-4bit classic-4bit-cpull \
		--rates 100mbit --workers 2 --repeats 3 --csv lab/bench_network/bench_classic.csv \
		--markdown lab/bench_network/findings.md --section classic
	$(PY) -m tools.doc_tables

# Emulated hosts (root, alone on the machine): each host 1/D of a core, links at rate / D, times divided by D
# (lab/bench_emulated/findings.md).  bench-emulation-check: the validation, the same CNN rows at D = 3
# and 6, 3 runs of 24 timed steps each (about 10 minutes).  bench-emulated: every mode on the CNN, 2 and 4 workers, 100 Mbit/s,
# one run each (about 15 minutes).  bench-emulated-targets: the same 3 times, then the 8-worker Horovod rows of
# mlp10m 3 times, with the compressed allreduce also in the messages of 1 MiB it used before (4 timed steps;
# about 85 minutes): the step-time targets, README's step times.  bench-emulated-full: the
# whole matrix, both models, 2 to 16 workers, 100 Mbit/s and 1 Gbit/s, 3 runs (many hours: 16 workers and 8
# servers run at D = 15).
EMULATED_MODES = none mxnet-2bit gc-none 4bit-groups 4bit-cpull topk-1e-3 lgc hvd-gc-none hvd-4bit hvd-4bit-cpull \
	hvd-topk-1e-3 hvd-lgc
CLASSIC = classic-2bit classic-4bit classic-4bit-cpull
EMULATED = $(PY) -m tools.bench_network --servers half --steps 8
bench-emulation-check: install data
	$(PY) -m tools.bench_network --models fmnist-cnn --modes none 4bit-cpull topk-1e-3 lgc --rates 100mbit \
		--workers 2 --steps 24 --repeats 3 --dilation 3 6 --csv lab/bench_emulated/validation.csv \
		--markdown lab/bench_emulated/findings.md --section emulation-validation
bench-emulated: install data
	$(EMULATED) --models fmnist-cnn --modes $(EMULATED_MODES) $(CLASSIC) --rates 100mbit --workers 2 4 \
		--csv lab/bench_emulated/cnn_one_run.csv
bench-emulated-targets: install data
	$(EMULATED) --repeats 3 --models fmnist-cnn --modes $(EMULATED_MODES) $(CLASSIC) --rates 100mbit --workers 2 4 \
		--csv lab/bench_emulated/cnn.csv --scaling-plot lab/bench_emulated/cnn.png \
		--markdown lab/bench_emulated/findings.md --section emulated-cnn
	$(EMULATED) --repeats 3 --models mlp10m --modes hvd-gc-none hvd-4bit hvd-4bit-cpull hvd-4bit-cpull-1mib --rates 100mbit --workers 8 \
		--steps 4 --warmup 1 \
		--csv lab/bench_emulated/mlp10m_ring.csv --markdown lab/bench_emulated/findings.md --section emulated-ring
	$(PY) -m tools.doc_tables
bench-emulated-full: install data
	$(EMULATED) --repeats 3 --models fmnist-cnn mlp10m --modes $(EMULATED_MODES) --rates 100mbit 1gbit \
		--workers 2 4 8 16 --csv lab/bench_emulated/full.csv --scaling-plot lab/bench_emulated/full.png

# Push and pull overlapping at 100 Mbit/s (root; about 40 minutes on 2 cores): MXNet's dist_sync against
# mxnet_gc's store uncompressed, 4bit and 4bit with compressed pulls, the 10M-parameter MLP, 2 and 4
# workers; rewrites its section of lab/bench_network/findings.md, lab/bench_network/bench_overlap.csv and .png.
bench-overlap: install
	$(PY) -m tools.bench_network --models mlp10m --modes none gc-none 4bit 4bit-cpull --rates 100mbit \
		--workers 2 4 --steps 4 --warmup 1 --repeats 3 --csv lab/bench_network/bench_overlap.csv \
		--plot lab/bench_network/bench_overlap.png --markdown lab/bench_network/findings.md --section overlap

# Layer-wise sparsification on the same harness (root; about 2 hours on 2 cores): layer-wise, one-bucket,
# merged and merged+pipelined top-k on cnn-fc (the communication-heavy model: convolutions under a 10.7M-
# parameter head), on the parameter server and on Horovod; the many-layer MLP (mlp-deep: 34 tensors) on the
# parameter server; both MLPs (mlp10m: few large layers) on Horovod; then uncompressed against
# merged+pipelined at 1 Gbit/s; then one bucket against fixed 1 MiB buckets and the DP plan on Horovod at
# 1 Gbit/s (printed tables, pasted by hand into the section "Fixed buckets").  Every job runs 3 times (in
# rounds) and its row pools them.  Rewrites its sections of lab/bench_sparse/findings.md.
SPARSE_MODES = topk-layerwise topk-one topk-merged topk-pipelined
SPARSE_RUN = $(PY) -m tools.bench_network --rates 100mbit 1gbit --workers 2 4 --steps 8 --repeats 3 \
	--markdown lab/bench_sparse/findings.md
bench-sparse: install
	$(SPARSE_RUN) --models cnn-fc --modes $(SPARSE_MODES) --csv lab/bench_sparse/bench_sparse_cnnfc_repeats.csv \
		--plot lab/bench_sparse/bench_sparse_cnnfc_repeats.png --section sparse-cnn-fc-repeats
	$(SPARSE_RUN) --models cnn-fc --modes $(addprefix hvd-,$(SPARSE_MODES)) \
		--csv lab/bench_sparse/bench_sparse_cnnfc_horovod_repeats.csv --plot lab/bench_sparse/bench_sparse_cnnfc_horovod_repeats.png \
		--section sparse-cnn-fc-horovod-repeats
	$(SPARSE_RUN) --models mlp-deep --modes topk-layerwise topk-one topk-pipelined \
		--csv lab/bench_sparse/bench_sparse_deep_repeats.csv --plot lab/bench_sparse/bench_sparse_deep_repeats.png --section sparse-deep-repeats
	$(SPARSE_RUN) --models mlp10m mlp-deep --modes $(addprefix hvd-,$(SPARSE_MODES)) \
		--csv lab/bench_sparse/bench_sparse_mlp_horovod_repeats.csv \
		--plot lab/bench_sparse/bench_sparse_mlp_horovod_repeats.png --section sparse-mlp-horovod-repeats
	$(PY) -m tools.bench_network --models cnn-fc --modes none topk-pipelined hvd-gc-none hvd-topk-pipelined \
		--rates 1gbit --workers 2 4 --steps 8 --repeats 3 --csv lab/bench_sparse/bench_sparse_dense_repeats.csv \
		--plot lab/bench_sparse/bench_sparse_dense_repeats.png --markdown lab/bench_sparse/findings.md \
		--section sparse-dense-repeats
	$(PY) -m tools.bench_network --models cnn-fc --modes hvd-topk-one hvd-topk-fixed hvd-topk-pipelined \
		--rates 1gbit --workers 2 4 --steps 8 --repeats 3 --csv lab/bench_sparse/bench_sparse_fixed_cnnfc_horovod.csv \
		--plot lab/bench_sparse/bench_sparse_fixed_cnnfc_horovod.png
	$(PY) -m tools.bench_network --models mlp10m mlp-deep --modes hvd-topk-one hvd-topk-fixed hvd-topk-pipelined \
		--rates 1gbit --workers 2 4 --steps 8 --repeats 3 --csv lab/bench_sparse/bench_sparse_fixed_mlp_horovod.csv \
		--plot lab/bench_sparse/bench_sparse_fixed_mlp_horovod.png

# The accuracy study (lab/accuracy/findings.md).  study: the CNN, threshold sweeps of MXNet's 2bit and of 4bit's
# one group on seed 1, then every configuration on 3 or 5 seeds (37 runs of 6 epochs, about 2.5 hours
# on 2 cores; writes each run to lab/accuracy/accuracy.jsonl as it ends, with its provenance; every run
# is trained afresh: continue an interrupted study with `python -m tools.study_accuracy --reuse
# lab/accuracy/accuracy.jsonl`, which reuses the runs of the same code, printed as stored).
# study-resnet20: gluoncv's CIFAR ResNet-20 on Fashion-MNIST, 5 epochs: uncompressed and MXNet 2bit (the CNN
# study's tuned threshold; run study first) on seeds 1-2, 4bit groups with and without compressed pulls on
# seeds 1-3 (about 20 minutes a run, 3.3 hours in all, on 2 cores: 260 to 310 images/s; continues like study).
study: install data
	$(PY) -m tools.study_accuracy
# 4bit with per-layer groups, with and without compressed pulls, against uncompressed on 10 seeds, and
# 5-bit compressed pulls on 5 (the CNN, 6 epochs, the tuned values of `make study`; about 60 minutes on 2
# cores; lab/accuracy/accuracy_10seeds.jsonl; the last command prints the table of all four)
study-seeds: install data
	$(PY) -m tools.study_accuracy --no-sweep --tuned-by lab/accuracy/accuracy.jsonl \
		--json lab/accuracy/accuracy_10seeds.jsonl --seeds 1 2 3 4 5 6 7 8 9 10 --few-seeds 10 \
		--configs uncompressed "4bit, per-layer groups" "4bit, per-layer groups, compressed pull"
	$(PY) -m tools.study_accuracy --no-sweep --tuned-by lab/accuracy/accuracy.jsonl \
		--json lab/accuracy/accuracy_10seeds.jsonl --seeds 1 2 3 4 5 --configs "4bit, per-layer groups, compressed pull, 5 bits"
	$(PY) -m tools.study_accuracy --no-sweep --tuned-by lab/accuracy/accuracy.jsonl \
		--json lab/accuracy/accuracy_10seeds.jsonl --seeds 1 2 3 4 5 6 7 8 9 10 --few-seeds 10 \
		--configs uncompressed "4bit, per-layer groups" "4bit, per-layer groups, compressed pull" \
		"4bit, per-layer groups, compressed pull, 5 bits" --report
study-resnet20: install data
	$(PY) -m tools.study_accuracy --model resnet20 --epochs 5 --lr-steps 3,4 --seeds 1 2 --no-sweep \
		--tuned-by lab/accuracy/accuracy.jsonl --json lab/accuracy/accuracy_resnet20.jsonl --configs uncompressed "MXNet 2bit"
	$(PY) -m tools.study_accuracy --model resnet20 --epochs 5 --lr-steps 3,4 --seeds 1 2 3 --no-sweep \
		--tuned-by lab/accuracy/accuracy.jsonl --json lab/accuracy/accuracy_resnet20.jsonl \
		--configs "4bit, per-layer groups" "4bit, per-layer groups, compressed pull"

# Learned gradient compression (docs/lgc.md).  study-lgc: the accuracy study, every configuration and
# seed on real jobs, every row of lab/lgc_study/findings.md's tables (about 8 hours on 2 cores; rewrites lab/lgc_study/lgc_study_*.json
# and their plots); study-lgc-seeds: LGC-PS's recommended setting, its ablation and uncompressed on 6 seeds
# (2 workers; about 30 minutes; lab/lgc_study/seeds/).  study-pareto: every other method on the same settings, added to those files, then
# accuracy against bytes (lab/accuracy/pareto.png, the tables of lab/accuracy/findings.md; after
# study-lgc; about 4 hours; `.venv/bin/python -m tools.study_pareto --report` redraws from the saved runs).
# bench-lgc: step times of uncompressed, 4bit with groups, top-k and LGC on the parameter
# server and on Horovod, on the namespaced harness, then top-k and LGC-PS on cnn-fc with 4 workers at
# 10 Mbit/s (root; about 25 + 35 minutes; rewrites its two sections of lab/bench_lgc/findings.md, and
# lab/bench_lgc/: bench_lgc.csv, bench_lgc.png, bench_lgc_10mbit.csv).
study-lgc: install data
	$(PY) -m tools.study_lgc --workers 2 --epochs 3 --seeds 1 2 3 --table-rows
	$(PY) -m tools.study_lgc --workers 4 --epochs 6 --lr-steps 4,5 --lr-warmup-epochs 1 --seeds 1 2 3 --table-rows
	$(PY) -m tools.study_lgc --model cnn-fc --workers 2 --epochs 3 --limit 20000 --lr 0.01 --dense 100 \
		--ramp 100 --ae 100 --seeds 1 2 --table-rows
study-lgc-seeds: install data
	$(PY) -m tools.study_lgc --workers 2 --epochs 3 --seeds 1 2 3 4 5 6 --results lab/lgc_study/seeds \
		--configs uncompressed "LGC without autoencoder, DGC momentum" \
		"LGC-PS, own codes, every worker's candidates, density x workers, signs, clip, DGC momentum"
study-pareto: install data
	$(PY) -m tools.study_pareto --markdown lab/accuracy/findings.md
bench-lgc: install data
	$(PY) -m tools.bench_network --models fmnist-cnn --modes gc-none 4bit-groups topk-1e-3 lgc hvd-gc-none \
		hvd-topk-1e-3 hvd-lgc \
		--rates 100mbit 1gbit \
		--workers 2 4 --steps 8 --repeats 3 --csv lab/bench_lgc/bench_lgc.csv --plot lab/bench_lgc/bench_lgc.png \
		--markdown lab/bench_lgc/findings.md --section lgc
	$(PY) -m tools.bench_network --models cnn-fc --modes topk-1e-3 lgc --rates 10mbit --workers 4 --steps 8 \
		--repeats 3 --csv lab/bench_lgc/bench_lgc_10mbit.csv --markdown lab/bench_lgc/findings.md --section lgc-10mbit

# The C++ kernels and a fuzz driver (tests/asan/kernel_fuzz.cc) built with AddressSanitizer and
# UndefinedBehaviorSanitizer, every instruction-set copy the library has; tests/test_kernel_fuzz.py runs
# a corpus of random and adversarial payloads through it.
ASAN_DIR := build/asan
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
	-std=c++17 -fopenmp -Isrc_cpp
ifeq ($(shell uname -m),x86_64)
ASAN_ISAS := baseline x86_64_v3 x86_64_v4
ASAN_DISPATCH := -DMXGC_MULTI_ISA
else
ASAN_ISAS := baseline
endif
ASAN_OBJS := $(foreach isa,$(ASAN_ISAS),$(ASAN_DIR)/quantizer_kernels_$(isa).o $(ASAN_DIR)/topk_sparsifier_$(isa).o)
$(ASAN_DIR)/%_baseline.o: src_cpp/%.cc $(wildcard src_cpp/*.h)
	@mkdir -p $(ASAN_DIR)
	g++ $(ASAN_FLAGS) -DMXGC_ISA=baseline -c $< -o $@
$(ASAN_DIR)/%_x86_64_v3.o: src_cpp/%.cc $(wildcard src_cpp/*.h)
	@mkdir -p $(ASAN_DIR)
	g++ $(ASAN_FLAGS) -DMXGC_ISA=x86_64_v3 -march=x86-64-v3 -c $< -o $@
$(ASAN_DIR)/%_x86_64_v4.o: src_cpp/%.cc $(wildcard src_cpp/*.h)
	@mkdir -p $(ASAN_DIR)
	g++ $(ASAN_FLAGS) -DMXGC_ISA=x86_64_v4 -march=x86-64-v4 -c $< -o $@
$(ASAN_DIR)/kernel_fuzz: $(ASAN_OBJS) tests/asan/kernel_fuzz.cc src_cpp/dispatch.cc src_cpp/codec_table.cc \
		src_cpp/kernels.def src_cpp/codecs.def $(wildcard src_cpp/*.h)
	g++ $(ASAN_FLAGS) $(ASAN_DISPATCH) tests/asan/kernel_fuzz.cc src_cpp/dispatch.cc src_cpp/codec_table.cc \
		$(ASAN_OBJS) -o $@
asan: $(ASAN_DIR)/kernel_fuzz

clean:
	rm -rf build $(VENV) *.egg-info mxnet_gc/*.so
