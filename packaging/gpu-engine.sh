#!/bin/sh
# Runs the engine on a GPU through its one executor (every model, one device
# or many, is loaded from a plan): the oracle, speculative, EAGLE-3,
# placement and memory tests with -engine.backend=cuda, sampling the
# process's GPU memory with nvidia-smi; and greedy decode as the window runs
# it against `tandem bench`'s decode, for synthetic Qwen3-1.7B and -8B
# Q4_K_M shapes.
#
# The GPU machine has no Go and only what travels with the repository: 64
# MiB in all, the tree about 30 of it. The F16 demo target (34 MB
# compressed) and its EAGLE-3 draft do not fit beside each other, so the
# work goes in two calls on one warm machine, the first leaving the F16
# target in /tmp/tandem-engine for the second:
#   packaging/gpu-engine.sh build [DIR]   here: DIR/a (engine test binary,
#                                         F16 demo target, oracle) and DIR/b
#                                         (engine test binary, EAGLE-3 draft,
#                                         synthmodel, Qwen3 vocabulary)
#   packaging/gpu-engine.sh run-a [DIR]   there, carrying DIR/a: oracle,
#                                         speculative, placement, one-device
#                                         plan, KV types and memory tests
#   packaging/gpu-engine.sh run-b [DIR]   there, carrying DIR/b, after run-a:
#                                         the EAGLE-3 tests, then window path
#                                         vs bench on synthetic Qwen3 shapes
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

# pack compresses a model file from ../shared for the carry.
pack() {
	xz -T2 --lzma2=preset=9e,pb=1,lp=1,lc=0 -c "$shared/models/$1" >"$2/$1.xz"
}

# shared lays out ../shared as the tests read it: the oracle files of $1,
# the models in $keep, the demo pair bundled with the repository.
layout() {
	mkdir -p ../shared/models ../shared/oracle
	for f in "$1"/*.json; do ln -sf "$f" ../shared/oracle/; done
	ln -sf "$keep"/*.gguf ../shared/models/
	ln -sf "$root/assets/factory-target-Q4_K_M.gguf" "$root/assets/factory-draft-Q8_0.gguf" ../shared/models/
}

case "$cmd" in
build)
	mkdir -p "$dir/a" "$dir/b"
	cd "$root"
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$dir/a/engine.test" ./engine
	xz -f -9e -T2 "$dir/a/engine.test"
	cp -f "$dir/a/engine.test.xz" "$dir/b/"
	cp -f "$shared/oracle/oracle.json" "$dir/a/"
	cp -f "$shared/oracle/oracle.json" "$shared/oracle/eagle3-llamacpp.json" "$dir/b/"
	pack factory-target-F16.gguf "$dir/a"
	pack factory-eagle3-F16.gguf "$dir/b"
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$dir/b/synthmodel" ./packaging/tools/synthmodel
	xz -9e -T2 -c "$shared/testdata/vocab/vocab-qwen3.gguf" >"$dir/b/vocab-qwen3.gguf.xz"
	du -sh "$dir/a" "$dir/b"
	;;
run-a)
	dir=$(cd "$dir/a" && pwd)
	mkdir -p "$keep"
	unpack "$dir/engine.test"
	unpack "$dir/factory-target-F16.gguf"
	mv "$dir/factory-target-F16.gguf" "$keep/"
	chmod +x "$dir/engine.test"
	cd "$root"
	layout "$dir"
	out=${OUT:-/tmp}
	(while :; do nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits; sleep 0.2; done) >"$out/gpu-memory.csv" 2>&1 &
	sampler=$!
	cd engine
	# Oracle, greedy speculative, placement over virtual devices of the GPU,
	# one device's plan against what the backend holds, the KV cache types
	# the backend runs (the quantized-cache test skips until CUDA runs
	# them), and the memory tests.
	"$dir/engine.test" -engine.backend=cuda -test.v -test.run "${TESTS:-^Test(GreedySpeculative|OracleTeacherForced|Cancel|RequestLimits|Placed(Pair|Target)|SingleDevicePlan|KVTypes|QuantizedKVCache|GPUMemory)}" \
		-test.skip '^TestSingleDevicePlan$/^EAGLE-3$' 2>&1 | tee "$out/engine-cuda.log" || true
	"$dir/engine.test" -engine.backend=cuda -test.run '^$' -test.bench DemoPair -test.benchtime 20x 2>&1 | tee -a "$out/engine-cuda.log" || true
	kill $sampler
	echo "summary:"
	grep -E '^(--- FAIL|FAIL|ok|PASS)|GPUMEM|holds .* plan' "$out/engine-cuda.log" | head -60
	echo "peak GPU memory of a test process (MiB):"
	nvidia-smi --query-gpu=index,uuid --format=csv,noheader
	sort -t, -k3 -n "$out/gpu-memory.csv" | tail -2
	;;
run-b)
	dir=$(cd "$dir/b" && pwd)
	if [ ! -f "$keep/factory-target-F16.gguf" ]; then
		echo "no $keep/factory-target-F16.gguf: run run-a first on this machine" >&2
		exit 1
	fi
	unpack "$dir/engine.test"
	unpack "$dir/factory-eagle3-F16.gguf"
	unpack "$dir/vocab-qwen3.gguf"
	mv "$dir/factory-eagle3-F16.gguf" "$keep/"
	chmod +x "$dir/engine.test"
	cd "$root"
	layout "$dir"
	out=${OUT:-/tmp}
	cd engine
	# The EAGLE-3 draft on one device (the target's) and placed, and one
	# device's plan with it against what the backend holds.
	"$dir/engine.test" -engine.backend=cuda -test.v -test.run "${TESTS:-^Test(Eagle3|PlacedEagle3)}" 2>&1 | tee "$out/engine-eagle3-cuda.log" || true
	"$dir/engine.test" -engine.backend=cuda -test.v -test.run '^TestSingleDevicePlan$/^EAGLE-3$' 2>&1 | tee -a "$out/engine-eagle3-cuda.log" || true
	echo "summary:"
	grep -E '^(--- FAIL|FAIL|ok|PASS)|holds .* plan|k=[14]:' "$out/engine-eagle3-cuda.log" | head -40
	# Window path vs bench: each iteration loads bench's one device
	# (--backend cuda, context 512) and the window's plan (GPU 0 of the
	# driver's list, its default context) and decodes 128 greedy tokens on
	# each; the medians of 5.
	models=/tmp/tandem-models
	mkdir -p "$models"
	for shape in qwen3-1.7b qwen3-8b; do
		m="$models/$shape-Q4_K_M.gguf"
		[ -f "$m" ] || "$dir/synthmodel" -shape "$shape" -type Q4_K_M -vocab "$dir/vocab-qwen3.gguf" -o "$m"
		"$dir/engine.test" -engine.backend=cuda -engine.bench-model "$m" -test.run '^$' -test.bench WindowPath -test.benchtime 5x 2>&1 |
			grep -E 'WINDOWPATH|Benchmark|FAIL|panic' || true
	done
	echo "done when: window/bench is within 0.97 and 1.03 for both shapes"
	;;
*)
	echo "usage: $0 build|run-a|run-b [DIR]" >&2
	exit 2
	;;
esac
