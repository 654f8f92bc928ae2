#!/bin/sh
# Verification passes of a few rows on CUDA (issue 17): the product kernels
# for 2 to 8 rows on each path (BenchmarkMatVecRows: tensor cores with
# 4/8/16 warps a block, matrix-vector kernels with one or two weight rows
# a warp), then the pass time over rows 1-16 of the demo target inflated
# to Qwen3-8B (Q4_K_M and F16) with every product of 2+ rows on tensor
# cores (tc), on the matrix-vector kernels with one and two weight rows a
# warp (mv1, mv2), and with the backend's default, and a per-kernel
# profile of a 4-row pass on tc and the default. For a before/after, run
# an older gpubench over the same models (kernels/cuda/NOTES.md, call 24,
# has the figures before this script's defaults).
#
# The GPU machine has no Go, so this runs in halves:
#   packaging/bench-rows.sh build [DIR]   here: cuda.test, gpubench and
#                                         synthmodel (xz) into DIR
#                                         (default .carry/rows, ~12 MB)
#   packaging/bench-rows.sh run [DIR]     there: kernel tests, the kernel
#                                         benchmark, inflation, the curves
#                                         (~4-5 minutes; logs in $OUT:
#                                         tests.log, bench.log, curves.txt)
# ROOT is the repository there when the script travels in DIR rather than
# in the checkout (ROOT=$PWD sh DIR/bench-rows.sh run DIR). TESTS (a -test.run pattern, default the product and fusion tests), BENCH
# (0 skips the kernel benchmark) and TYPES (default "Q4_K_M F16") narrow it.
set -eu
cmd=${1:-}
root=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}

case "$cmd" in
build)
	dir=${2:-.carry/rows}
	mkdir -p "$dir"
	cd "$root"
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$dir/cuda.test" ./kernels/cuda
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$dir/gpubench" ./packaging/tools/gpubench
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$dir/synthmodel" ./packaging/tools/synthmodel
	xz -f -9 -T2 "$dir/cuda.test" "$dir/gpubench" "$dir/synthmodel"
	du -ch "$dir"/* | tail -1
	;;
run)
	dir=$(cd "${2:-.carry/rows}" && pwd)
	out=${OUT:-/tmp}
	cd "$root"
	for f in cuda.test gpubench synthmodel; do # python3: xz may be missing there
		[ -f "$dir/$f" ] || python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$dir/$f.xz" "$dir/$f"
		chmod +x "$dir/$f"
	done
	nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader || true
	# kernel tests against the CPU (embedded PTX)
	(cd kernels/cuda && timeout 90 "$dir/cuda.test" -test.v \
		-test.run "${TESTS:-TestMatMul|TestGLU|TestNormQuantizes|TestFusedBlock|TestMatVecRowsRange|TestEmbeddedKernels|TestWorkspace|TestArgmaxTopK}" \
		>"$out/tests.log" 2>&1) || true
	echo "tests: $(grep -c -- '--- PASS' "$out/tests.log") PASS, $(grep -c -- '--- FAIL' "$out/tests.log") FAIL"
	grep -- '--- FAIL' "$out/tests.log" | head -20 || true
	grep -E '^(ok|FAIL|panic)' "$out/tests.log" || true
	models=/tmp/tandem-rows
	mkdir -p "$models"
	: >"$out/curves.txt"
	for typ in ${TYPES:-Q4_K_M F16}; do
		m="$models/qwen3-8b-$typ.gguf"
		[ -f "$m" ] || "$dir/synthmodel" -inflate assets/factory-target-Q4_K_M.gguf -shape qwen3-8b -type "$typ" -o "$m"
		b="$dir/gpubench -backend cuda -model $m -pp 256 -tg 64 -r 2 -rows 1,2,3,4,5,8,16"
		for v in "tc:-matvec-rows 1 -profile -profile-rows 4" "mv2:-matvec-rows 8 -matvec-weight-rows 2" \
			"default:-profile -profile-rows 4" "mv1:-matvec-rows 8 -matvec-weight-rows 1"; do
			echo "== $typ ${v%%:*}: ${v#*:}" | tee -a "$out/curves.txt"
			timeout 45 $b ${v#*:} >"$out/one.txt" 2>&1 || echo "gpubench failed: $?" >>"$out/one.txt"
			cat "$out/one.txt" >>"$out/curves.txt"
			grep -v '^  \|^$\|us of kernels' "$out/one.txt" || true
		done
		rm -f "$out/one.txt"
		rm -f "$m"
		if [ "${BENCH:-1}" != 0 ] && [ ! -f "$out/bench.log" ]; then
			(cd kernels/cuda && timeout 80 "$dir/cuda.test" -test.run XXX -test.bench MatVecRows -test.benchtime 3x \
				>"$out/bench.log" 2>&1) || true
		fi
	done
	echo "== summary"
	grep '^==\|rows |' "$out/curves.txt"
	grep '^==\|^  \|us of kernels' "$out/curves.txt" | grep -v '^== .* mv' | cut -c1-90
	;;
*)
	echo "usage: $0 build|run [DIR]" >&2
	exit 2
	;;
esac
