# interruption-router: build, test, demo, package and deploy.
#
# Newcomers need two targets: `make demo` (the whole system on a local AWS emulator) and
# `make test`. Both install what they need on a fresh machine: the Python tools (moto, cfn-lint,
# checkov, the AWS CLI, cargo-lambda) go into project virtualenvs, pinned in tools/.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

PYTHON ?= python3
VENV := .venv
CHECKOV_VENV := .venv-checkov
# The project's tools come first, so tests find the pinned moto_server and cfn-lint.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

CARGO ?= cargo
# cargo's target dir (CARGO_TARGET_DIR may move it outside the clone to reuse builds).
TARGET_DIR := $(shell $(CARGO) metadata --format-version 1 --no-deps 2>/dev/null | $(PYTHON) -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' 2>/dev/null || echo target)

# Deployment settings (see README "Deploying").
STACK_NAME ?= interruption-router
REGION ?=
BUCKET ?=
CLUSTER ?=
KARPENTER_ROLE ?=
INGEST_MODE ?= Queue
ARCH ?= arm64

.PHONY: help tools demo test unit lint clippy fmt-check bench soak fuzz package deploy-base deploy-tenant deploy-fis

help:
	@echo "make demo        the whole system on a local AWS emulator (no AWS account needed)"
	@echo "make test        everything CI runs: lint, unit, integration and end-to-end tests, demo"
	@echo "make bench       storm, cold-start and micro benchmarks; writes BENCHMARKS.md"
	@echo "make soak        the fault scenarios with 3,000 events each"
	@echo "make fuzz        fuzz the event parser for FUZZ_SECONDS (default 120)"
	@echo "make package     release build zipped as bootstrap.zip (ARCH=arm64|x86_64)"
	@echo "make deploy-base BUCKET=… REGION=… [STACK_NAME=…] [INGEST_MODE=Queue|Direct]"
	@echo "make deploy-tenant CLUSTER=… REGION=… [KARPENTER_ROLE=…]"
	@echo "make deploy-fis  CLUSTER=… REGION=…"

# ------------------------------------------------------------------ tools
tools: $(VENV)/.installed $(CHECKOV_VENV)/.installed

$(VENV)/.installed: tools/requirements.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.9+ (the tools are from PyPI)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements.txt
	@touch $@

# checkov pins versions that conflict with the AWS CLI and moto, so it has a venv of its own.
$(CHECKOV_VENV)/.installed: tools/requirements-checkov.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements-checkov.txt
	@touch $@

# ------------------------------------------------------------------ the two set-up commands
demo: $(VENV)/.installed
	$(CARGO) build --workspace --bins
	$(TARGET_DIR)/debug/routerctl demo
	$(TARGET_DIR)/debug/routerctl demo --accounts 3 --regions 2

test: tools
	$(MAKE) lint
	$(MAKE) unit
	$(MAKE) demo

# Builds the router binary first: the end-to-end tests run it as a real process.
unit:
	$(CARGO) build --workspace --bins
	$(CARGO) test --workspace

# ------------------------------------------------------------------ static checks
lint: $(VENV)/.installed $(CHECKOV_VENV)/.installed fmt-check clippy
	$(VENV)/bin/cfn-lint cloudformation/*.yaml
	$(CHECKOV_VENV)/bin/checkov --quiet --compact -d cloudformation --framework cloudformation --skip-download \
		--config-file cloudformation/.checkov.yaml

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# ------------------------------------------------------------------ reliability (not in CI)
# The fault scenarios at 3,000 events (five minutes of storm each) instead of make test's 300.
soak: $(VENV)/.installed
	$(CARGO) build --workspace --bins
	FAULT_SCENARIO_EVENTS=3000 $(CARGO) test --workspace --test faults -- --nocapture

FUZZ_SECONDS ?= 120
# cargo-fuzz passes nightly-only -Z flags (sanitizers); RUSTC_BOOTSTRAP lets this stable toolchain
# accept them. Seeds come from the real-format fixtures.
fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	mkdir -p fuzz/corpus/classify
	cp fixtures/events/*.json fuzz/corpus/classify/
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run classify -- -max_total_time=$(FUZZ_SECONDS)

# ------------------------------------------------------------------ performance
# The storm benchmark runs the optimised router binary; criterion runs first so its figures land in
# BENCHMARKS.md. The binary is built with the bench profile (it inherits release: LTO, one codegen
# unit, strip, panic=unwind) so cargo bench reuses the same optimised build of the AWS SDK instead
# of compiling it a second time for the release profile.
bench: $(VENV)/.installed
	$(CARGO) build --profile bench --workspace --bins
	$(CARGO) bench --workspace --bench core
	$(CARGO) bench --workspace --bench storm -- --write $(CURDIR)/BENCHMARKS.md

# ------------------------------------------------------------------ packaging and deployment
LAMBDA_TARGET_arm64 := aarch64-unknown-linux-gnu
LAMBDA_TARGET_x86_64 := x86_64-unknown-linux-gnu
ZIP := $(TARGET_DIR)/lambda/interruption-router/bootstrap.zip

define require
$(if $($(1)),,$(error $(1) is not set: $(2)))
endef

# cargo-lambda (and zig) only when packaging: `make test` never needs them, nor the aarch64 std
# that `rustup target add` downloads, which not every machine can fetch.
$(VENV)/.package-installed: tools/requirements-package.txt $(VENV)/.installed
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements-package.txt
	@touch $@

package: $(VENV)/.package-installed
	$(if $(LAMBDA_TARGET_$(ARCH)),,$(error ARCH must be arm64 or x86_64, not "$(ARCH)"))
	rustup target add $(LAMBDA_TARGET_$(ARCH))
	$(VENV)/bin/cargo-lambda lambda build --release --$(subst _,-,$(subst x86_64,x86-64,$(ARCH))) \
		--output-format zip -p interruption-router
	@echo "packaged $(ZIP) ($(ARCH))"

# The code goes to a content-addressed key: CloudFormation updates the function only when
# CodeS3Key changes.
deploy-base: $(VENV)/.installed
	$(call require,BUCKET,the S3 bucket (same region) to upload bootstrap.zip to)
	$(call require,REGION,the AWS region to deploy to)
	@test -f $(ZIP) || { echo "error: $(ZIP) not found; run make package first"; exit 1; }
	key=interruption-router/bootstrap-$$(sha256sum $(ZIP) | cut -c1-16).zip; \
	$(VENV)/bin/aws s3 cp --region $(REGION) $(ZIP) s3://$(BUCKET)/$$key; \
	$(VENV)/bin/aws cloudformation deploy --region $(REGION) --stack-name $(STACK_NAME) \
		--template-file cloudformation/base.yaml --capabilities CAPABILITY_IAM --no-fail-on-empty-changeset \
		--parameter-overrides CodeS3Bucket=$(BUCKET) CodeS3Key=$$key IngestMode=$(INGEST_MODE) Architecture=$(ARCH)

deploy-tenant: $(VENV)/.installed
	$(call require,CLUSTER,the EKS cluster name this queue is for)
	$(call require,REGION,the AWS region of the base stack)
	$(VENV)/bin/aws cloudformation deploy --region $(REGION) --stack-name $(STACK_NAME)-tenant-$(CLUSTER) \
		--template-file cloudformation/tenant.yaml --capabilities CAPABILITY_IAM --no-fail-on-empty-changeset \
		--parameter-overrides ClusterName=$(CLUSTER) BaseStackName=$(STACK_NAME) KarpenterRoleName=$(KARPENTER_ROLE)
	@$(VENV)/bin/aws cloudformation describe-stacks --region $(REGION) --stack-name $(STACK_NAME)-tenant-$(CLUSTER) \
		--query "Stacks[0].Outputs[?OutputKey=='QueueName'].OutputValue" --output text \
		| sed 's/^/Set Karpenter: --set settings.interruptionQueue=/'

deploy-fis: $(VENV)/.installed
	$(call require,CLUSTER,the EKS cluster whose spot nodes the experiment interrupts)
	$(call require,REGION,the AWS region of the cluster)
	$(VENV)/bin/aws cloudformation deploy --region $(REGION) --stack-name $(STACK_NAME)-fis-$(CLUSTER) \
		--template-file cloudformation/fis.yaml --capabilities CAPABILITY_IAM --no-fail-on-empty-changeset \
		--parameter-overrides ClusterName=$(CLUSTER)
