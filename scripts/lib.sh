# shellcheck shell=bash
# Shared settings for every script of the project. Sourced, never run.
#
# HLRS_CACHE holds everything that is expensive and not part of the repository:
# the toolchain pieces that are not Debian packages (bindgen, libclang), the
# downloaded kernel source and the kernel builds, keyed by version + config.
# It is shared by every clone on the machine.

set -euo pipefail

HLRS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HLRS_CACHE=${HLRS_CACHE:-/var/cache/habanalabs-rs}
BINDGEN_VERSION=0.72.1
LIBCLANG_VERSION=18.1.1
BINDGEN=$HLRS_CACHE/bindgen-$BINDGEN_VERSION/bin/bindgen
VENV=$HLRS_CACHE/venv-libclang-$LIBCLANG_VERSION
LIBCLANG_PATH=$VENV/lib/python3.11/site-packages/clang/native
export LIBCLANG_PATH
RUSTC=/usr/bin/rustc
RUSTDOC=/usr/bin/rustdoc
CLIPPY_DRIVER=/usr/bin/clippy-driver

# Time a step and print what it did. When HLRS_STEPS names a file (a shell
# variable of the calling script, not exported), the step's name and seconds
# are appended to it for the closing timing table.
step() {
	local what=$1
	shift
	local t0 secs
	t0=$(date +%s.%N)
	printf '==> %s\n' "$what"
	"$@"
	secs=$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")
	printf '    %s: %s s\n' "$what" "$secs"
	if [ -n "${HLRS_STEPS:-}" ]; then printf '%s\t%s\n' "$what" "$secs" >>"$HLRS_STEPS"; fi
}

# Run a long command and print a line every 20 s while it runs, instead of
# silence (downloads, `cargo install`, unpacking, the kernel build). The
# progress goes to stderr (the command's stdout may be captured); when
# PROGRESS_STATUS names a function, its output is part of the line. Returns
# the command's status.
with_progress() {
	local what=$1
	shift
	local t0 pid
	t0=$(date +%s)
	"$@" &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		for _ in $(seq 20); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 1
		done
		kill -0 "$pid" 2>/dev/null || break
		printf '    ... %s: %s, %d s elapsed\n' "$what" \
			"$(if [ -n "${PROGRESS_STATUS:-}" ]; then "$PROGRESS_STATUS"; else echo "still running"; fi)" \
			"$(($(date +%s) - t0))" >&2
	done
	wait "$pid"
}

die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# The unpacked kernel source tree (set by the bootstrap, read by the others).
kernel_src() {
	local f=$HLRS_CACHE/kernel-src.path
	[ -f "$f" ] || die "kernel source not downloaded yet: run scripts/bootstrap.sh"
	cat "$f"
}

kmake_vars() {
	printf '%s\n' ARCH=x86_64 LLVM= "RUSTC=$RUSTC" "RUSTDOC=$RUSTDOC" "BINDGEN=$BINDGEN"
}

# Sets KOBJ to the cached kernel's build directory, the test kernel unless
# HLRS_KERNEL says otherwise (building it first when it is not cached;
# kernel.sh prints its progress on stderr).
kernel_dir() {
	KOBJ=$("$HLRS_ROOT/scripts/kernel.sh")
}

# Toolchain, cached test kernel and module: what both `make test` and
# `make run` start with. Exports KOBJ, the kernel build directory.
prepare_module() {
	# The bootstrap's own progress lines go to the terminal (stderr).
	step "bootstrap (toolchain, kernel source)" "$HLRS_ROOT/scripts/bootstrap.sh" >&2
	step "test kernel (cached by version + config)" kernel_dir
	export KOBJ
	step "module" "$HLRS_ROOT/scripts/module.sh" build
}

# Static (glibc, crt-static) userspace binaries for the busybox guest:
# target/guest-bin/hlrs (the CLI) and target/guest-bin/tests/<name>, one per
# test target of tests/guest.
build_guest_bins() {
	local out=$HLRS_ROOT/target/guest-bin log=$HLRS_ROOT/target/guest-bin.log
	local -a flags=(--release --target x86_64-unknown-linux-gnu)
	mkdir -p "$out"
	export RUSTFLAGS="-C target-feature=+crt-static"
	(cd "$HLRS_ROOT" && cargo build -p hlrs-cli "${flags[@]}") >"$log" 2>&1 ||
		{ cat "$log"; return 1; }
	cp "$HLRS_ROOT/target/x86_64-unknown-linux-gnu/release/hlrs" "$out/hlrs"
	local list
	# pipefail: a test binary that does not compile fails the build (the
	# others' artifacts alone must not pass for all of them).
	list=$(set -o pipefail && cd "$HLRS_ROOT" && cargo test -p hlrs-guest-tests "${flags[@]}" --no-run \
		--message-format=json 2>>"$log" | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])') || { cat "$log"; return 1; }
	[ -n "$list" ] || { cat "$log"; return 1; }
	rm -rf "$out/tests"
	mkdir -p "$out/tests"
	while read -r name exe; do
		cp "$exe" "$out/tests/$name"
	done <<<"$list"
	unset RUSTFLAGS
}

# The PCI pass's pieces (HLRS_PCI=1): the QEMU with vfio-user (built once
# into the cache by scripts/qemu.sh; exported as HLRS_QEMU) and the model
# process (cargo, release). Logs go to $1.
pci_prepare() {
	local log=$1
	HLRS_QEMU=$("$HLRS_ROOT/scripts/qemu.sh") || return 1
	export HLRS_QEMU
	(cd "$HLRS_ROOT" && cargo build --release -p gaudi2-model --color never) >"$log" 2>&1 ||
		{ tail -n 30 "$log"; return 1; }
}
