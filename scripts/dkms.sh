#!/usr/bin/env bash
# DKMS packaging of the module (dkms.conf at the top level).
#
#   dkms.sh check          `dkms add` + `dkms build` with Debian's dkms against
#                          the cached test-kernel tree (--kernelsourcedir), in a
#                          private DKMS tree under target/dkms (nothing of the
#                          system is touched); the built .ko is copied to
#                          target/dkms/habanalabs_rs.ko for the guest to load.
#   dkms.sh install [KVER] stage the source in /usr/src/habanalabs_rs-VERSION and
#                          `dkms add/build/install` it for KVER (default: the
#                          running kernel), for a host whose kernel tree was
#                          built with Rust. HLRS_KBUILD_ARGS passes the Rust
#                          toolchain of that kernel build (default: this
#                          project's: LLVM= RUSTC=... BINDGEN=...).
source "$(dirname "$0")/lib.sh"
cd "$HLRS_ROOT"
NAME=habanalabs_rs
VERSION=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
[ -n "$VERSION" ] || die "no PACKAGE_VERSION in dkms.conf"
command -v dkms >/dev/null || die "dkms is not installed (scripts/bootstrap.sh installs it)"

# The module's source as DKMS builds it: Kbuild, dkms.conf and src/ without
# the userspace crates and without build products.
stage() {
	local dest=$1
	rm -rf "$dest"
	mkdir -p "$dest"
	cp Kbuild dkms.conf LICENSE "$dest/"
	rsync -a --exclude user/ --exclude '*.o' --exclude '.*.cmd' --exclude '*.ko' \
		--exclude '*.mod' --exclude '*.mod.c' --exclude '*.long-type-*' --exclude '*.d' \
		src/ "$dest/src/"
}

: "${HLRS_KBUILD_ARGS:=$(kmake_vars | tr '\n' ' ')}"
export HLRS_KBUILD_ARGS

case ${1:-check} in
check)
	KOBJ=${KOBJ:-$(scripts/kernel.sh)}
	KVER=$(cat "$KOBJ/include/config/kernel.release")
	T=$HLRS_ROOT/target/dkms
	rm -rf "$T"
	mkdir -p "$T/source" "$T/tree"
	stage "$T/source/$NAME-$VERSION"
	opts=(-m "$NAME" -v "$VERSION" --sourcetree "$T/source" --dkmstree "$T/tree")
	dkms add "${opts[@]}" >"$T/dkms.log" 2>&1 || { cat "$T/dkms.log"; die "dkms add failed"; }
	dkms build "${opts[@]}" -k "$KVER" --kernelsourcedir "$KOBJ" >>"$T/dkms.log" 2>&1 ||
		{ cat "$T/dkms.log" "$T/tree/$NAME/$VERSION/build/make.log" 2>/dev/null | tail -n 40; die "dkms build failed"; }
	ko=$(find "$T/tree/$NAME/$VERSION/$KVER" -name "$NAME.ko" | head -n1)
	[ -n "$ko" ] || die "dkms build produced no $NAME.ko"
	cp "$ko" "$T/$NAME.ko"
	echo "    dkms $(dkms --version | sed 's/dkms-//'): built $NAME $VERSION for $KVER -> target/dkms/$NAME.ko" >&2
	;;
install)
	KVER=${2:-$(uname -r)}
	SRC=/usr/src/$NAME-$VERSION
	stage "$SRC"
	dkms remove -m "$NAME" -v "$VERSION" --all >/dev/null 2>&1 || true
	dkms add -m "$NAME" -v "$VERSION"
	dkms build -m "$NAME" -v "$VERSION" -k "$KVER"
	dkms install -m "$NAME" -v "$VERSION" -k "$KVER"
	;;
*) die "usage: dkms.sh check | install [KVER]" ;;
esac
