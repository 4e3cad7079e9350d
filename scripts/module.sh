#!/usr/bin/env bash
# Build, lint or format the kernel module.
#
#   module.sh build       build habanalabs_rs.ko against $KDIR, or the cached test kernel
#   module.sh clippy      same, with clippy-driver and the kernel's lint set, warnings fatal
#   module.sh build-lint LOG
#                         one compile for both (`make test`): the module built by
#                         clippy-driver (the same code rustc generates), its
#                         clippy and objtool findings in LOG; exit 0 clean, 1 no
#                         module, 2 a module with findings
#   module.sh fmt[-check] rustfmt with the kernel's .rustfmt.toml
#   module.sh clean
#
# HLRS_MODULE_SRC=DIR builds a copy of the sources in DIR instead of the
# repository (Kbuild refuses MO= once the source tree has objects of its own):
# `make bench` builds the same sources for the production kernel there,
# leaving the test kernel's objects alone.
#
# KDIR may be any prepared kernel tree with CONFIG_RUST (for example
# /lib/modules/$(uname -r)/build on a Gaudi host); the toolchain variables
# can then be overridden from the environment (RUSTC, BINDGEN, ...).
source "$(dirname "$0")/lib.sh"
cd "$HLRS_ROOT"

kdir() {
	if [ -n "${KDIR:-}" ]; then
		echo "$KDIR"
	elif [ -n "${KOBJ:-}" ]; then
		echo "$KOBJ"
	else
		scripts/kernel.sh
	fi
}

kmake() {
	local k
	k=$(kdir)
	mapfile -t KV < <(kmake_vars)
	make -C "$k" "${KV[@]}" M="${HLRS_MODULE_SRC:-$HLRS_ROOT}" "$@"
}

case ${1:-build} in
build)
	kmake -s modules
	echo "    built $(ls "${HLRS_MODULE_SRC:-$HLRS_ROOT}"/habanalabs_rs.ko)" >&2
	;;
clippy)
	# Objects must be rebuilt for clippy to see them.
	rm -f src/hlrs.o habanalabs_rs.ko
	out=$(kmake -s CLIPPY=1 CLIPPY_DRIVER="$CLIPPY_DRIVER" modules 2>&1) || { echo "$out"; exit 1; }
	# objtool checks the same rebuilt object: any of its warnings (a panic
	# path falling through, for example) fails the lint step too.
	if grep -qE '^(warning|error)|objtool' <<<"$out"; then
		echo "$out"
		die "clippy or objtool found problems"
	fi
	echo "    clippy: clean" >&2
	;;
build-lint)
	log=${2:?module.sh build-lint LOG}
	rm -f src/hlrs.o habanalabs_rs.ko
	kmake -s CLIPPY=1 CLIPPY_DRIVER="$CLIPPY_DRIVER" modules >"$log" 2>&1 || { cat "$log"; exit 1; }
	[ -f habanalabs_rs.ko ] || { cat "$log"; exit 1; }
	echo "    built $(ls "$HLRS_ROOT"/habanalabs_rs.ko) (clippy-driver)" >&2
	if grep -qE '^(warning|error)|objtool' "$log"; then
		exit 2
	fi
	echo "    clippy: clean" >>"$log"
	;;
fmt | fmt-check)
	check=()
	[ "$1" = fmt-check ] && check=(--check)
	ksrc=$(kernel_src)
	/usr/bin/rustfmt --edition 2021 --config-path "$ksrc/.rustfmt.toml" "${check[@]}" src/hlrs.rs
	cargo fmt --all "${check[@]}"
	echo "    rustfmt: ${1}: ok" >&2
	;;
clean)
	if [ -f "$HLRS_CACHE/kernel-src.path" ]; then kmake -s clean || true; fi
	;;
*) die "unknown command $1" ;;
esac
