#!/bin/sh
# Issue 22 on a GPU: the CUDA kernels of qwen3moe and gemma3 (MoE, GeGLU,
# Scale, sliding-window attention) against the CPU backend, the two
# families' transformers oracles on CUDA (F16 fixtures teacher-forced and
# greedy; Q8_0/Q4_K_M re-encodings against the float oracle), BenchmarkMoE,
# and decode of a synthetic Qwen3-30B-A3B Q4_K_M beside the dense 8B
# Q4_K_M (gpubench, with a per-kernel profile of the MoE step).
#
# The GPU machine has no Go, so this runs in two halves:
#   packaging/moe-cuda.sh build [DIR]   here: test binaries, tools, the
#                                       fixtures and the vocabulary into DIR
#                                       (.carry), xz-compressed (~27 MiB)
#   packaging/moe-cuda.sh run [DIR]     there, from the repository root;
#                                       results under $OUT (or /tmp/out)
set -eu
cmd=${1:-}
dir=${2:-.carry/moe}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED:-$root/../shared}

case "$cmd" in
build)
	mkdir -p "$dir/engine/model/testdata"
	cd "$root"
	CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$dir/cuda.test" ./kernels/cuda
	CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$dir/model.test" ./engine/model
	CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$dir/hfconvert.test" ./packaging/tools/hfconvert
	CGO_ENABLED=0 go build -ldflags='-s -w' -o "$dir/gpubench" ./packaging/tools/gpubench
	CGO_ENABLED=0 go build -ldflags='-s -w' -o "$dir/synthmodel" ./packaging/tools/synthmodel
	cp engine/model/testdata/qwen3moe-tiny-F16* engine/model/testdata/gemma3-tiny-F16* "$dir/engine/model/testdata/"
	cp "$shared/testdata/vocab/vocab-qwen3.gguf" "$dir/"
	chmod u+w "$dir/vocab-qwen3.gguf"
	xz -f -1 -T2 "$dir/cuda.test" "$dir/model.test" "$dir/hfconvert.test" "$dir/gpubench" "$dir/synthmodel" \
		"$dir/vocab-qwen3.gguf" "$dir"/engine/model/testdata/*.gguf
	;;
run)
	out=${OUT:-/tmp/out}
	mkdir -p "$out"
	cd "$dir"
	for f in $(find . -name '*.xz'); do # python3: xz itself may be missing there
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "${f%.xz}"
		rm -f "$f"
	done
	chmod +x cuda.test model.test hfconvert.test gpubench synthmodel
	mkdir -p p/q/r # hfconvert's test reads the fixtures at ../../../engine/model/testdata
	models=/tmp/tandem-models
	mkdir -p "$models"
	(for spec in qwen3-30b-a3b qwen3-8b; do
		[ -f "$models/$spec-Q4_K_M.gguf" ] || ./synthmodel -shape "$spec" -type Q4_K_M -vocab vocab-qwen3.gguf -o "$models/$spec-Q4_K_M.gguf"
	done) >"$out/synth.txt" 2>&1 &
	./cuda.test -test.run 'TestMoE|TestGeGLUScale|TestWindowAttention|TestEmbeddedKernels' -test.v >"$out/kernels.txt" 2>&1 || true
	(cd engine/model && ../../model.test -test.run TestFamilyOracle -model.backend=cuda -test.v) >"$out/family.txt" 2>&1 || true
	(cd p/q/r && ../../../hfconvert.test -test.run TestQuantizedFixtures -hfconvert.backend=cuda -test.v) >"$out/quant.txt" 2>&1 || true
	./cuda.test -test.run XXX -test.bench MoE -test.benchtime 30x >"$out/benchmoe.txt" 2>&1 || true
	wait
	./gpubench -backend cuda -header -model "$models/qwen3-30b-a3b-Q4_K_M.gguf" -pp 128 -tg 64 -r 1 -profile >"$out/bench.txt" 2>&1 || true
	./gpubench -backend cuda -model "$models/qwen3-8b-Q4_K_M.gguf" -pp 128 -tg 64 -r 1 -anchor-tg 252 >>"$out/bench.txt" 2>&1 || true
	grep -h -- '--- \|largest\|cuda:' "$out/kernels.txt" "$out/family.txt" "$out/quant.txt" | grep -v '^    --- PASS'
	grep Benchmark "$out/benchmoe.txt" || true
	cat "$out/bench.txt"
	;;
*)
	echo "usage: $0 build|run [DIR]" >&2
	exit 2
	;;
esac
