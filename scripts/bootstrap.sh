#!/usr/bin/env bash
# Install the toolchain the build needs, idempotently. A second run does
# nothing and takes seconds. Every piece comes from a registry this machine
# reaches: Debian's packages, crates.io, PyPI.
#
#   Debian:   rustc-web rust-web-src rust-web-clippy rustfmt-web (rustc 1.96 with
#             its library sources, matching the kernel's needs) and build deps
#   crates:   bindgen-cli (Debian's is too old for kernel 7.3)
#   PyPI:     the libclang wheel (LLVM 18; Debian bookworm only has <= 16)
#   Debian:   linux-source-7.3 from trixie-backports, downloaded with a private
#             apt configuration (the system's sources are not touched), unpacked
#             into the cache. Falls back to linux-source-7.2 from unstable.
source "$(dirname "$0")/lib.sh"

T0=$(date +%s)
mkdir -p "$HLRS_CACHE"
exec 9>"$HLRS_CACHE/.bootstrap.lock"
flock 9

DEBS=(rustc-web rust-web-src rust-web-clippy rustfmt-web bc bison flex libelf-dev
	libssl-dev cpio python3-venv qemu-system-x86 busybox-static rsync kmod dkms)

apt_packages() {
	local missing=()
	for p in "${DEBS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		echo "    all Debian packages present"
		return
	fi
	echo "    installing: ${missing[*]}"
	with_progress "apt-get update" apt-get update -qq
	with_progress "apt-get install" env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

bindgen_cli() {
	if [ -x "$BINDGEN" ]; then
		echo "    $("$BINDGEN" --version) already at $BINDGEN"
		return
	fi
	# The machine's cargo builds it; the result does not depend on rustc-web.
	with_progress "cargo install bindgen-cli" cargo install --locked bindgen-cli \
		--version "$BINDGEN_VERSION" --root "$HLRS_CACHE/bindgen-$BINDGEN_VERSION" --quiet
}

libclang_wheel() {
	if [ -f "$LIBCLANG_PATH/libclang.so" ]; then
		echo "    libclang $LIBCLANG_VERSION already at $LIBCLANG_PATH"
		return
	fi
	rm -rf "$VENV"
	/usr/bin/python3 -m venv "$VENV"
	with_progress "pip install libclang" "$VENV/bin/pip" install --quiet "libclang==$LIBCLANG_VERSION"
	[ -f "$LIBCLANG_PATH/libclang.so" ] || die "libclang.so not found in $LIBCLANG_PATH"
}

# Download linux-source-$1 from suite $2 with a private apt configuration.
fetch_kernel_deb() {
	local ver=$1 suite=$2 d=$HLRS_CACHE/apt-$2
	mkdir -p "$d/sources" "$d/lists/partial" "$d/archives/partial"
	cat >"$d/sources/k.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	local opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$d/sources"
		-o "Dir::State::Lists=$d/lists" -o "Dir::Cache::Archives=$d/archives"
		-o APT::Sandbox::User=root -q)
	apt-get "${opts[@]}" update >/dev/null 2>&1 || return 1
	(cd "$d/archives" && apt-get "${opts[@]}" download "linux-source-$ver" >/dev/null 2>&1) || return 1
	ls "$d/archives"/linux-source-"$ver"_*.deb 2>/dev/null | head -n1
}

kernel_source() {
	if [ -f "$HLRS_CACHE/kernel-src.path" ] && [ -f "$(cat "$HLRS_CACHE/kernel-src.path")/Makefile" ]; then
		echo "    kernel source already at $(cat "$HLRS_CACHE/kernel-src.path")"
		return
	fi
	local deb="" ver
	for pair in 7.3:trixie-backports 7.3:sid 7.2:sid; do
		ver=${pair%%:*}
		echo "    trying linux-source-$ver from ${pair#*:}"
		if deb=$(with_progress "download linux-source-$ver" fetch_kernel_deb "$ver" "${pair#*:}") &&
			[ -n "$deb" ]; then
			break
		fi
		deb=""
	done
	[ -n "$deb" ] || die "could not download linux-source-7.3 (trixie-backports) nor linux-source-7.2 (sid)"
	echo "    got $(basename "$deb")"
	local x=$HLRS_CACHE/deb-x
	rm -rf "$x"
	mkdir -p "$x"
	dpkg -x "$deb" "$x"
	local tarball
	tarball=$(ls "$x"/usr/src/linux-source-*.tar.xz | head -n1)
	local debver
	debver=$(dpkg-deb -f "$deb" Version)
	local dest=$HLRS_CACHE/src/linux-$debver
	rm -rf "$dest"
	mkdir -p "$dest"
	with_progress "unpack $(basename "$tarball")" tar -xf "$tarball" -C "$dest" --strip-components=1
	rm -rf "$x"
	echo "$dest" >"$HLRS_CACHE/kernel-src.path"
	echo "    unpacked to $dest"
}

step "Debian packages (rustc-web, qemu, busybox, build deps)" apt_packages
step "bindgen-cli $BINDGEN_VERSION (crates.io)" bindgen_cli
step "libclang $LIBCLANG_VERSION wheel (PyPI)" libclang_wheel
step "kernel source (linux-source-7.3 .deb)" kernel_source
echo "bootstrap done in $(($(date +%s) - T0)) s"
