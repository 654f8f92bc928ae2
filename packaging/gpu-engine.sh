#!/bin/sh
# Runs the engine's oracle, speculative and multi-device tests on a GPU
# (-engine.backend=cuda) and samples the process's GPU memory with
# nvidia-smi, to compare with what the backend accounted and the plan.
#
# The GPU machine has no Go and only what travels with the repository
# (64 MiB), so this runs in two halves:
#   packaging/gpu-engine.sh build [DIR]   here: the engine test binary and the
#                                         F16 demo target (the oracle's model),
#                                         compressed (xz) to fit the 64 MiB
#                                         carry beside the repository
#   packaging/gpu-engine.sh run [DIR]     there: lay out ../shared from DIR and
#                                         the bundled demo pair, run the tests
set -eu
cmd=${1:-}
dir=${2:-.carry/engine}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED:-$root/../shared}

case "$cmd" in
build)
	mkdir -p "$dir"
	cd "$root"
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$dir/engine.test" ./engine
	xz -f -9e -T2 "$dir/engine.test"
	cp "$shared/oracle/oracle.json" "$dir/"
	xz -9e -T2 -c "$shared/models/factory-target-F16.gguf" >"$dir/factory-target-F16.gguf.xz"
	;;
run)
	dir=$(cd "$dir" && pwd)
	cd "$root"
	# The tests find ../shared beside the repository; the bundled demo files
	# are byte for byte the shared ones.
	mkdir -p ../shared/models ../shared/oracle
	ln -sf "$dir/factory-target-F16.gguf" ../shared/models/
	ln -sf "$dir/oracle.json" ../shared/oracle/
	ln -sf "$root/assets/factory-target-Q4_K_M.gguf" "$root/assets/factory-draft-Q8_0.gguf" ../shared/models/
	for f in engine.test factory-target-F16.gguf; do # python3: xz itself may be missing there
		python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$dir/$f.xz" "$dir/$f"
	done
	chmod +x "$dir/engine.test"
	out=${OUT:-/tmp}
	(while :; do nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits; sleep 0.2; done) >"$out/gpu-memory.csv" 2>&1 &
	sampler=$!
	cd engine
	"$dir/engine.test" -engine.backend=cuda -test.v -test.run "${TESTS:-^Test(GreedySpeculative|OracleTeacherForced|Cancel|RequestLimits|Placed(Pair|Target)|GPUMemory)}" 2>&1 | tee "$out/engine-cuda.log" || true
	"$dir/engine.test" -engine.backend=cuda -test.run '^$' -test.bench DemoPair -test.benchtime 20x 2>&1 | tee -a "$out/engine-cuda.log" || true
	kill $sampler
	echo "peak GPU memory of a test process (MiB):"
	nvidia-smi --query-gpu=index,uuid --format=csv,noheader
	sort -t, -k3 -n "$out/gpu-memory.csv" | tail -2
	;;
*)
	echo "usage: $0 build|run [DIR]" >&2
	exit 2
	;;
esac
