#!/usr/bin/env bash
# Build qemu-system-x86_64 with the vfio-user client (`-device vfio-user-pci`,
# QEMU >= 10.1) into the cache, keyed by QEMU version + patches + configure
# flags, and print its path on the last line of stdout (progress on stderr).
# Concurrent callers wait on a lock instead of building twice; a cached build
# is reused at once.
#
# Why a build: no QEMU that installs on bookworm has the client (bookworm
# has 7.2, bookworm-backports 10.0.2); Debian's 10.2.2 source builds here
# with meson 1.9 from PyPI and the two one-line `+ds` fixes in
# scripts/qemu/*.sed (docs/pci.md).
#
#   HLRS_QEMU_VERSIONS  override scripts/qemu/versions (space separated)
source "$(dirname "$0")/lib.sh"

HERE=$HLRS_ROOT/scripts/qemu
MESON_VERSION=1.9.0
# Bump when the recipe below changes what it produces.
RECIPE=1
read -r -a VERSIONS <<<"${HLRS_QEMU_VERSIONS:-$(grep -v '^#' "$HERE/versions" | tr '\n' ' ')}"
mapfile -t FLAGS < <(grep -v '^#' "$HERE/configure-flags")
KEY=$( (cat "$HERE"/*.sed "$HERE/configure-flags"; echo "recipe $RECIPE meson $MESON_VERSION"; gcc --version | head -n1) |
	sha256sum | cut -c1-12)
APT=$HLRS_CACHE/apt-qemu-src
mkdir -p "$HLRS_CACHE/qemu"

# A private apt configuration with deb-src lines (the system has none),
# which never touches the system's lists or package cache.
apt_opts() {
	printf '%s\n' -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$APT/sources" \
		-o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT/cache" \
		-o "Dir::Cache::Archives=$APT/archives" -o APT::Sandbox::User=root -q
}

source_lists() {
	mkdir -p "$APT/sources" "$APT/lists/partial" "$APT/archives/partial" "$APT/cache" "$APT/dl"
	cat >"$APT/sources/q.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie-backports forky sid experimental
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	mapfile -t O < <(apt_opts)
	apt-get "${O[@]}" update >"$APT/update.log" 2>&1 || { cat "$APT/update.log" >&2; return 1; }
}

# Download the orig tarball of the first served version; prints its path.
fetch_source() {
	mapfile -t O < <(apt_opts)
	local v up tarball
	for v in "${VERSIONS[@]}"; do
		up=${v#*:}
		up=${up%-*}
		tarball=$APT/dl/qemu_$up.orig.tar.xz
		if [ -s "$tarball" ]; then echo "$v $tarball"; return 0; fi
		echo "    trying qemu $v" >&2
		if (cd "$APT/dl" && apt-get "${O[@]}" source --download-only "qemu=$v" >"$APT/source.log" 2>&1) &&
			[ -s "$tarball" ]; then
			echo "$v $tarball"
			return 0
		fi
		echo "    qemu $v is not served ($(tail -n1 "$APT/source.log"))" >&2
	done
	return 1
}

meson_venv() {
	local venv=$HLRS_CACHE/venv-meson-$MESON_VERSION
	if [ ! -x "$venv/bin/meson" ]; then
		python3 -m venv "$venv" >&2
		"$venv/bin/pip" install -q "meson==$MESON_VERSION" pycotap==1.3.1 >&2
	fi
	echo "$venv"
}

build_deps() {
	dpkg -s libglib2.0-dev ninja-build libpixman-1-dev seabios qemu-system-data >/dev/null 2>&1 && return
	echo "    installing QEMU build dependencies (libglib2.0-dev ninja-build libpixman-1-dev seabios qemu-system-data)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		libglib2.0-dev ninja-build libpixman-1-dev seabios qemu-system-data >"$HLRS_CACHE/qemu/apt.log" 2>&1 ||
		{ tail -n 20 "$HLRS_CACHE/qemu/apt.log" >&2; die "could not install QEMU's build dependencies"; }
}

# The progress line of the ninja build: steps done of total.
ninja_status() {
	local log=$QOBJ/src/build/ninja.log
	grep -o '^\[[0-9]*/[0-9]*\]' "$log" 2>/dev/null | tail -n1 | tr -d '[]' | sed 's|/| of |;s|$| steps|' || echo "starting"
}

configure_and_build() {
	local tarball=$1 venv
	venv=$(meson_venv)
	rm -rf "$QOBJ/src"
	mkdir -p "$QOBJ/src"
	with_progress "unpack $(basename "$tarball")" tar -xf "$tarball" -C "$QOBJ/src" --strip-components=1
	sed -i -f "$HERE/ds-no-edk2-blobs.sed" "$QOBJ/src/meson.build"
	sed -i -f "$HERE/ds-no-dtb.sed" "$QOBJ/src/pc-bios/meson.build"
	mkdir -p "$QOBJ/src/build"
	(cd "$QOBJ/src/build" && ../configure --python="$venv/bin/python3" "${FLAGS[@]}") \
		>"$QOBJ/configure.log" 2>&1 || { tail -n 30 "$QOBJ/configure.log" >&2; die "QEMU configure failed (log: $QOBJ/configure.log)"; }
	grep -q '^CONFIG_VFIO_USER=y' "$QOBJ/src/build/x86_64-softmmu-config-devices.mak" ||
		die "this QEMU has no vfio-user client (CONFIG_VFIO_USER)"
	local jobs
	jobs=$(nproc)
	PROGRESS_STATUS=ninja_status with_progress "QEMU build" \
		sh -c "cd '$QOBJ/src/build' && nice -n 3 ninja -j$jobs qemu-system-x86_64 >ninja.log 2>&1" ||
		{ tail -n 30 "$QOBJ/src/build/ninja.log" >&2; die "QEMU build failed (log: $QOBJ/src/build/ninja.log)"; }
	mkdir -p "$QOBJ/bin"
	cp "$QOBJ/src/build/qemu-system-x86_64" "$QOBJ/bin/"
	# Keep the binary, drop the 1.5 GB tree.
	rm -rf "$QOBJ/src"
}

# One lock for every build of this key: a second caller waits, then finds
# the first one's result.
exec 9>"$HLRS_CACHE/qemu/build-$KEY.lock"
flock 9
for v in "${VERSIONS[@]}"; do
	QOBJ=$HLRS_CACHE/qemu/${v#*:}-$KEY
	if [ -x "$QOBJ/bin/qemu-system-x86_64" ]; then
		echo "    QEMU cached at $QOBJ" >&2
		echo "$QOBJ/bin/qemu-system-x86_64"
		exit 0
	fi
done
step "QEMU build dependencies" build_deps >&2
step "QEMU source lists (private deb-src)" source_lists >&2
got=$(fetch_source) || die "no vfio-user capable QEMU source is served (tried: ${VERSIONS[*]}); the PCI pass cannot run"
VER=${got%% *}
TARBALL=${got#* }
QOBJ=$HLRS_CACHE/qemu/${VER#*:}-$KEY
step "build QEMU $VER into $QOBJ" configure_and_build "$TARBALL" >&2
"$QOBJ/bin/qemu-system-x86_64" -device help 2>/dev/null | grep -q vfio-user-pci ||
	die "the built QEMU lists no vfio-user-pci device"
echo "$QOBJ/bin/qemu-system-x86_64"
