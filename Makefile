# SPDX-License-Identifier: GPL-2.0
#
# Entry points (see README.md):
#   make test     bootstrap, kernel, module, host tests, guest run, one summary
#   make run      the main job: boot the guest, load the module, show it working
#                 (PCI=1: also a Gaudi2 on PCI, the model process behind vfio-user)
#   make bench    benchmarks on the production-configured kernel (KERNEL=debug: on the test kernel)
#   make fuzz     a long run of the ioctl fuzzer in the guest (FUZZ_ARGS="--seed S --calls N --seconds T")
#   make module   build the .ko (KDIR=... for any prepared Rust-enabled kernel tree)
#   make clippy   build the module under clippy with the kernel's lint set
#   make fmt / make fmt-check   rustfmt with the kernel's .rustfmt.toml
#   make dkms-check   `dkms build` against the cached test-kernel tree (make test runs it)
#   make dkms-install install through DKMS for the running kernel (KVER=... for another)

SHELL := /bin/bash
KDIR ?=

.PHONY: all test run bench fuzz module clippy fmt fmt-check bootstrap kernel guest host-test clean dkms-check dkms-install

all: module

test:
	@scripts/test.sh

# `make run PCI=1`: the guest also gets a Gaudi2 on PCI (docs/pci.md).
PCI ?= 0
run:
	@HLRS_PCI=$(PCI) scripts/run.sh

# `make bench` runs on the production-configured kernel; `make bench
# KERNEL=debug` on the test kernel.
KERNEL ?= production
bench:
	@HLRS_KERNEL=$(KERNEL) HLRS_BENCH_COMPARE=$(COMPARE) scripts/bench.sh

fuzz:
	@scripts/fuzz.sh

bootstrap:
	@scripts/bootstrap.sh

kernel: bootstrap
	@scripts/kernel.sh >/dev/null

module:
	@KDIR="$(KDIR)" scripts/module.sh build

clippy:
	@KDIR="$(KDIR)" scripts/module.sh clippy

fmt:
	@scripts/module.sh fmt

fmt-check:
	@scripts/module.sh fmt-check

dkms-check:
	@scripts/dkms.sh check

dkms-install:
	@scripts/dkms.sh install $(KVER)

host-test:
	@cargo test --workspace --exclude hlrs-guest-tests

clean:
	@scripts/module.sh clean
	@rm -rf target
