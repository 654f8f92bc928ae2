#!/bin/sh
# Benchmarks Tandem's CUDA backend against llama.cpp's marks on the same GPU
# (../shared/bench/anchors.md): prefill and greedy decode tokens/s, weight
# bandwidth against the copy roofline, and device memory, for the demo
# target and synthetic Qwen3-1.7B (Q4_K_M, Q8_0, F16) and Qwen3-8B (Q4_K_M,
# F16) models, then the time of a verification pass of 1 to 16 rows per
# model (gpubench -rows). Prints one Markdown table and the rows lines.
#
# The GPU machine has no Go, so this runs in two halves:
#   packaging/bench-cuda.sh build [DIR]   here: tools, kernel tests, vocabulary
#                                         and demo model into DIR (.carry),
#                                         compressed (xz) to fit the 64 MiB
#                                         the device tool carries
#   packaging/bench-cuda.sh run [DIR [KERNELS]]
#                                         there: make the synthetic models and
#                                         print the table; KERNELS is a folder
#                                         with ptx/*.ptx fresh from gen.sh to
#                                         use instead of the embedded ones
set -eu
cmd=${1:-}
dir=${2:-.carry}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED:-$root/../shared}

case "$cmd" in
build)
	mkdir -p "$dir"
	cd "$root"
	CGO_ENABLED=0 go test -c -ldflags=-s\ -w -o "$dir/cuda.test" ./kernels/cuda
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$dir/gpubench" ./packaging/tools/gpubench
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$dir/synthmodel" ./packaging/tools/synthmodel
	cp "$shared/testdata/vocab/vocab-qwen3.gguf" "$shared/models/factory-target-Q8_0.gguf" "$dir/"
	for f in cuda.test gpubench synthmodel vocab-qwen3.gguf factory-target-Q8_0.gguf; do
		xz -f -9 -T2 "$dir/$f"
	done
	;;
run)
	for f in "$dir"/*.xz; do # python3: xz itself may be missing there
		[ -f "$f" ] || continue
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "${f%.xz}"
		rm -f "$f"
	done
	chmod +x "$dir/cuda.test" "$dir/gpubench" "$dir/synthmodel"
	models=/tmp/tandem-models
	mkdir -p "$models"
	for spec in qwen3-1.7b:Q4_K_M qwen3-1.7b:Q8_0 qwen3-1.7b:F16 qwen3-8b:Q4_K_M qwen3-8b:F16; do
		out="$models/${spec%%:*}-${spec##*:}.gguf"
		[ -f "$out" ] || "$dir/synthmodel" -shape "${spec%%:*}" -type "${spec##*:}" -vocab "$dir/vocab-qwen3.gguf" -o "$out"
	done
	b="$dir/gpubench -backend cuda -r 3 -rows 1,2,4,5,8,9,16"
	if [ -n "${3:-}" ]; then b="$b -kernels $3"; fi
	# llama.cpp marks from anchors.md (the same-run table of 2026-12-01:
	# prefill pp512, decode tg128; the demo row from the older table)
	$b -header -model "$dir/factory-target-Q8_0.gguf" -anchor-tg 3533
	$b -model "$models/qwen3-1.7b-Q4_K_M.gguf" -anchor-pp 22450 -anchor-tg 567
	$b -model "$models/qwen3-1.7b-Q8_0.gguf" -anchor-pp 25782 -anchor-tg 528
	$b -model "$models/qwen3-1.7b-F16.gguf" -anchor-pp 36138 -anchor-tg 510
	$b -model "$models/qwen3-8b-Q4_K_M.gguf" -anchor-pp 9319 -anchor-tg 252
	$b -model "$models/qwen3-8b-F16.gguf" -anchor-pp 16878 -anchor-tg 201.5
	# what programmatic dependent launch gains (sm_90+): the same kernels,
	# each launched only when the one before it has finished
	s="$dir/gpubench -backend cuda -r 3"
	if [ -n "${3:-}" ]; then s="$s -kernels $3"; fi
	$s -model "$dir/factory-target-Q8_0.gguf" -anchor-tg 3533 -serial-launch
	$s -model "$models/qwen3-1.7b-Q4_K_M.gguf" -anchor-pp 22450 -anchor-tg 567 -serial-launch
	$s -model "$models/qwen3-1.7b-Q4_K_M.gguf" -r 1 -tg 16 -profile | tail -16
	;;
*)
	echo "usage: $0 build|run [DIR]" >&2
	exit 2
	;;
esac
