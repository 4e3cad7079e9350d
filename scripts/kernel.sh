#!/usr/bin/env bash
# Build the test kernel into the cache, keyed by kernel version + config hash.
# Prints the build directory on the last line of stdout. A cached build is
# reused at once; concurrent callers wait on a lock instead of building twice.
source "$(dirname "$0")/lib.sh"

FRAGMENT=$HLRS_ROOT/scripts/kconfig/test-kernel.config
KSRC=$(kernel_src)
KVER=$(basename "$KSRC")
# The key covers the fragment, the build recipe below and the compiler
# versions. Bump RECIPE when `configure` or `build` change what they produce
# (progress output and comments do not).
RECIPE=2
KEY=$( (cat "$FRAGMENT"; echo "recipe $RECIPE"; "$RUSTC" --version; gcc --version | head -n1) |
	sha256sum | cut -c1-12)
KOBJ=$HLRS_CACHE/build/$KVER-$KEY
mkdir -p "$HLRS_CACHE/build"
exec 8>"$KOBJ.lock"
flock 8

if [ -f "$KOBJ/.hlrs-complete" ]; then
	echo "    kernel cached at $KOBJ" >&2
	echo "$KOBJ"
	exit 0
fi

mapfile -t KV < <(kmake_vars)
configure() {
	rm -rf "$KOBJ"
	mkdir -p "$KOBJ"
	make -C "$KSRC" O="$KOBJ" "${KV[@]}" -s tinyconfig
	KCONFIG_CONFIG="$KOBJ/.config" "$KSRC/scripts/kconfig/merge_config.sh" -m -O "$KOBJ" \
		"$KOBJ/.config" "$FRAGMENT" >/dev/null
	make -C "$KSRC" O="$KOBJ" "${KV[@]}" -s olddefconfig
	# Every option of the fragment must have survived.
	local bad=0 line
	while IFS= read -r line; do
		case $line in CONFIG_*=*) ;; *) continue ;; esac
		if ! grep -qx "$line" "$KOBJ/.config"; then
			echo "    config option dropped by olddefconfig: $line" >&2
			bad=1
		fi
	done <"$FRAGMENT"
	if [ $bad -ne 0 ]; then
		echo "    (CONFIG_RUST drops out when rustc/bindgen/libclang are not usable:" >&2
		make -C "$KSRC" O="$KOBJ" "${KV[@]}" rustavailable >&2 || true
		die "test-kernel config is incomplete"
	fi
	echo "    all $(grep -c '^CONFIG_.*=' "$FRAGMENT") fragment options present" >&2
}
# Objects a complete build of this config produced last time (the progress
# total); the first build on a machine uses the figure measured here (1305, with the issue-19 debug options).
COUNT_FILE=$HLRS_CACHE/build/objects-$KEY.count
objects() { find "$KOBJ" -name '*.o' 2>/dev/null | wc -l; }
TOTAL=$(cat "$COUNT_FILE" 2>/dev/null || echo 1305)
# What the progress line shows besides the elapsed time.
built_of_total() { printf '%d/~%d objects' "$(objects)" "$TOTAL"; }
# The default target: bzImage plus Module.symvers (modpost needs it).
make_kernel() {
	make -C "$KSRC" O="$KOBJ" "${KV[@]}" -s -j"$(($(nproc) + 1))" >"$KOBJ/build.log" 2>&1
}
build() {
	# A progress line every 20 s instead of ten minutes of silence.
	PROGRESS_STATUS=built_of_total with_progress "kernel build" make_kernel ||
		{ tail -n 40 "$KOBJ/build.log" >&2; die "kernel build failed (log: $KOBJ/build.log)"; }
	objects >"$COUNT_FILE"
	touch "$KOBJ/.hlrs-complete"
}
step "configure $KVER (tinyconfig + fragment)" configure >&2
step "build $KVER into $KOBJ" build >&2
echo "$KOBJ"
