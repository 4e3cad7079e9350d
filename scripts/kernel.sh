#!/usr/bin/env bash
# Build a kernel into the cache, keyed by kernel version + config hash.
# Prints the build directory on the last line of stdout. A cached build is
# reused at once; concurrent callers wait on a lock instead of building twice.
#
#   HLRS_KERNEL=debug       (default) the test kernel: test-kernel.config, every
#                           debug option `make test` hunts bugs with
#   HLRS_KERNEL=production  the benchmark kernel: the same source and functional
#                           options, none of the debug ones (bench-kernel.config
#                           merged after), optimised for speed; built only when
#                           `make bench` first needs it
source "$(dirname "$0")/lib.sh"

FRAGMENT=$HLRS_ROOT/scripts/kconfig/test-kernel.config
FRAGMENTS=("$FRAGMENT")
KIND=${HLRS_KERNEL:-debug}
case $KIND in
debug) ;;
production) FRAGMENTS+=("$HLRS_ROOT/scripts/kconfig/bench-kernel.config") ;;
*) die "HLRS_KERNEL must be debug or production, not $KIND" ;;
esac
KSRC=$(kernel_src)
KVER=$(basename "$KSRC")
# The key covers the fragments, the build recipe below and the compiler
# versions. Bump RECIPE when `configure` or `build` change what they produce
# (progress output and comments do not).
RECIPE=2
KEY=$( (cat "${FRAGMENTS[@]}"; echo "recipe $RECIPE"; "$RUSTC" --version; gcc --version | head -n1) |
	sha256sum | cut -c1-12)
if [ "$KIND" = debug ]; then
	KOBJ=$HLRS_CACHE/build/$KVER-$KEY
else
	KOBJ=$HLRS_CACHE/build/$KVER-$KIND-$KEY
fi
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
		"$KOBJ/.config" "${FRAGMENTS[@]}" >/dev/null
	make -C "$KSRC" O="$KOBJ" "${KV[@]}" -s olddefconfig
	# Every option of the fragments must have survived, the last fragment
	# that names an option deciding its value.
	local bad=0 line opt
	declare -A want=()
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*) want[${line%%=*}]=$line ;;
		"# CONFIG_"*" is not set") opt=${line#\# }; want[${opt%% *}]=$line ;;
		esac
	done < <(cat "${FRAGMENTS[@]}")
	for opt in "${!want[@]}"; do
		line=${want[$opt]}
		case $line in
		CONFIG_*) grep -qx "$line" "$KOBJ/.config" ;;
		*) ! grep -q "^$opt=" "$KOBJ/.config" ;;
		esac || {
			echo "    config option not as asked after olddefconfig: $line" >&2
			bad=1
		}
	done
	if [ $bad -ne 0 ]; then
		echo "    (CONFIG_RUST drops out when rustc/bindgen/libclang are not usable:" >&2
		make -C "$KSRC" O="$KOBJ" "${KV[@]}" rustavailable >&2 || true
		die "test-kernel config is incomplete"
	fi
	echo "    all ${#want[@]} fragment options as asked ($KIND kernel)" >&2
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
step "configure $KVER, $KIND (tinyconfig + fragments)" configure >&2
step "build $KVER into $KOBJ" build >&2
echo "$KOBJ"
