#!/bin/sh
# Runs the engine on a GPU through its one executor (every model, one device
# or many, is loaded from a plan): the oracle, speculative, EAGLE-3,
# placement and memory tests with -engine.backend=cuda, sampling the
# process's GPU memory with nvidia-smi; and greedy decode as the window runs
# it against `tandem bench`'s decode, for synthetic Qwen3-1.7B and -8B
# Q4_K_M shapes.
#
# The GPU machine has no Go and only what travels with the repository: 64
# MiB in all, of which the tree takes about 36. The F16 demo target alone
# is 32 MB compressed, so it travels in two halves, in two calls on one
# warm machine; what a call leaves in /tmp/tandem-engine the next one uses.
#   packaging/gpu-engine.sh build [DIR]   here: DIR/1, DIR/2 and DIR/3, one
#                                         carry each (the lead's checkout:
#                                         DIR under its .carry)
#   packaging/gpu-engine.sh stage [DIR]   there, carrying DIR/1: the engine
#                                         test binary and the target's first half
#   packaging/gpu-engine.sh test [DIR]    there, carrying DIR/2, after stage:
#                                         the target's second half, the EAGLE-3
#                                         draft and the oracle; every test
#   packaging/gpu-engine.sh bench [DIR]   there, carrying DIR/3: synthetic
#                                         Qwen3 models, window path vs bench
set -eu
cmd=${1:-}
dir=${2:-.carry/engine}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED:-$root/../shared}
keep=/tmp/tandem-engine # survives between calls while the machine is warm

# unpack decompresses FILE.xz to FILE with python3 (xz itself may be missing
# there).
unpack() {
	python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1.xz" "$1"
}

# layout lays out ../shared as the tests read it: the oracle files of $1,
# the models in $keep, the demo pair bundled with the repository.
layout() {
	mkdir -p ../shared/models ../shared/oracle
	for f in "$1"/*.json "$1"/heldout.txt; do ln -sf "$f" ../shared/oracle/; done
	ln -sf "$keep"/*.gguf ../shared/models/
	ln -sf "$root/assets/factory-target-Q4_K_M.gguf" "$root/assets/factory-draft-Q8_0.gguf" ../shared/models/
}

case "$cmd" in
build)
	mkdir -p "$dir/1" "$dir/2" "$dir/3"
	cd "$root"
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$dir/1/engine.test" ./engine
	xz -f -9e -T2 "$dir/1/engine.test"
	cp -f "$dir/1/engine.test.xz" "$dir/3/"
	xz -T2 --lzma2=preset=9e,pb=1,lp=1,lc=0 -c "$shared/models/factory-target-F16.gguf" >"$dir/target.xz"
	half=$(( ($(wc -c <"$dir/target.xz") + 1) / 2 ))
	head -c "$half" "$dir/target.xz" >"$dir/1/target.xz.1"
	tail -c +"$((half + 1))" "$dir/target.xz" >"$dir/2/target.xz.2"
	rm "$dir/target.xz"
	xz -T2 -9e -c "$shared/models/factory-eagle3-F16.gguf" >"$dir/2/factory-eagle3-F16.gguf.xz"
	cp -f "$shared/oracle/oracle.json" "$shared/oracle/eagle3-llamacpp.json" "$shared/oracle/heldout.txt" "$dir/2/"
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$dir/3/synthmodel" ./packaging/tools/synthmodel
	xz -9e -T2 -c "$shared/testdata/vocab/vocab-qwen3.gguf" >"$dir/3/vocab-qwen3.gguf.xz"
	du -sh "$dir/1" "$dir/2" "$dir/3"
	;;
stage)
	dir=$(cd "$dir/1" && pwd)
	rm -rf "$keep"
	mkdir -p "$keep"
	cp "$dir/engine.test.xz" "$dir/target.xz.1" "$keep/"
	unpack "$keep/engine.test"
	chmod +x "$keep/engine.test"
	ls -la "$keep"
	;;
test)
	dir=$(cd "$dir/2" && pwd)
	if [ ! -f "$keep/target.xz.1" ] || [ ! -x "$keep/engine.test" ]; then
		echo "nothing staged in $keep: run stage first on this machine" >&2
		exit 1
	fi
	cat "$keep/target.xz.1" "$dir/target.xz.2" >"$keep/factory-target-F16.gguf.xz"
	unpack "$keep/factory-target-F16.gguf"
	cp "$dir/factory-eagle3-F16.gguf.xz" "$keep/"
	unpack "$keep/factory-eagle3-F16.gguf"
	rm -f "$keep"/*.xz "$keep"/*.xz.1
	cd "$root"
	layout "$dir"
	out=${OUT:-/tmp}
	(while :; do nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits; sleep 0.2; done) >"$out/gpu-memory.csv" 2>&1 &
	sampler=$!
	cd engine
	# Oracle, greedy speculative, EAGLE-3 (on the target's device and
	# placed), the chosen draft length on a tick clock (drafting that does
	# not pay goes off, that pays stays on; output the target's), placement
	# over virtual devices of the GPU, one device's plan against what the
	# backend holds, the KV cache types the backend runs (the
	# quantized-cache test skips until CUDA runs them), memory.
	"$keep/engine.test" -engine.backend=cuda -test.v -test.run "${TESTS:-^Test(GreedySpeculative|QuantizedGreedySpeculative|DFlashGreedy|OracleTeacherForced|Cancel|RequestLimits|Eagle3|DraftingThat|Placed|SingleDevicePlan|KVTypes|QuantizedKVCache|GPUMemory)}" 2>&1 | tee "$out/engine-cuda.log" || true
	"$keep/engine.test" -engine.backend=cuda -test.run '^$' -test.bench DemoPair -test.benchtime 20x 2>&1 | tee -a "$out/engine-cuda.log" || true
	kill $sampler
	echo "summary:"
	grep -E '^(--- FAIL|FAIL|ok|PASS)|GPUMEM|holds .* plan|k=[14]: drafted' "$out/engine-cuda.log" | head -60
	echo "peak GPU memory of a test process (MiB):"
	nvidia-smi --query-gpu=index,uuid --format=csv,noheader
	sort -t, -k3 -n "$out/gpu-memory.csv" | tail -2
	;;
bench)
	dir=$(cd "$dir/3" && pwd)
	unpack "$dir/engine.test"
	unpack "$dir/vocab-qwen3.gguf"
	chmod +x "$dir/engine.test"
	models=/tmp/tandem-models
	mkdir -p "$models"
	cd "$root/engine"
	for shape in qwen3-1.7b qwen3-8b; do
		m="$models/$shape-Q4_K_M.gguf"
		[ -f "$m" ] || "$dir/synthmodel" -shape "$shape" -type Q4_K_M -vocab "$dir/vocab-qwen3.gguf" -o "$m"
		# Each iteration loads bench's one device (--backend cuda, context
		# 512) and the window's plan (GPU 0 of the driver's list, its
		# default context) and decodes 128 greedy tokens on each; the
		# medians of 5.
		"$dir/engine.test" -engine.backend=cuda -engine.bench-model "$m" -test.run '^$' -test.bench WindowPath -test.benchtime 5x 2>&1 |
			grep -E 'WINDOWPATH|Benchmark|FAIL|panic' || true
	done
	echo "done when: window/bench is within 0.97 and 1.03 for both shapes"
	;;
*)
	echo "usage: $0 build|stage|test|bench [DIR]" >&2
	exit 2
	;;
esac
