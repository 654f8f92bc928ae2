#!/bin/sh
# Runs Tandem on two GPUs of one host and prints one Markdown report:
#   1. inventory: the GPUs, their link, what the CUDA driver tells Go, and
#      CopyFrom's ordering between the GPUs both ways
#   2. correctness: the placement tests (layer split, tensor split with the
#      head replicated and split, drafts on a GPU of their own, EAGLE-3
#      included) with their virtual devices on both GPUs, greedy output
#      equal to one device's
#   3. peer copy bandwidth GPU 0 <-> GPU 1
#   4. prefill and decode tokens/s of a Qwen3-8B-shaped Q4_K_M model on one
#      GPU, split by layers and by tensors, next to llama.cpp's marks
#      (../shared/bench/anchors.md)
#   5. per-GPU memory, plan against nvidia-smi, for a layer and a tensor
#      split of that model
#   6. the placement tests again with the draft on GPU 0 beside a target
#      split over GPUs 0-1
# With one GPU it says so and runs what it can; each step has a share of a
# time budget (BUDGET seconds, 360 by default) and is skipped, saying so,
# once the budget is spent.
#
# The GPU machine has no Go and only what travels with the repository
# (64 MiB in all), so this runs in two halves:
#   packaging/multigpu.sh build [DIR]   here: test binaries and tools built
#                                       with CGO_ENABLED=0, the oracle's
#                                       prompts, the EAGLE-3 draft and the
#                                       Qwen3 vocabulary, compressed (~17 MB)
#   packaging/multigpu.sh run [DIR]     there: lay out ../shared, make the
#                                       8B model, run; the report goes to
#                                       stdout and $OUT/report.md, logs to $OUT
# The placement tests load the repository's Q4_K_M demo target widened to
# F16 (-engine.placed-target): the oracle's F16 file does not fit the carry.
set -eu
cmd=${1:-}
dir=${2:-.carry/multigpu}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED:-$root/../shared}

case "$cmd" in
build)
	mkdir -p "$dir"
	cd "$root"
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$dir/engine.test" ./engine
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$dir/cuda.test" ./kernels/cuda
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$dir/synthmodel" ./packaging/tools/synthmodel
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$dir/gpubench" ./packaging/tools/gpubench
	for f in engine.test cuda.test synthmodel gpubench; do gzip -f -9 "$dir/$f"; done
	cp -f "$shared/oracle/oracle.json" "$dir/"
	gzip -9 -c "$shared/models/factory-eagle3-F16.gguf" >"$dir/factory-eagle3-F16.gguf.gz"
	gzip -9 -c "$shared/testdata/vocab/vocab-qwen3.gguf" >"$dir/vocab-qwen3.gguf.gz"
	du -sh "$dir"
	exit 0
	;;
run) ;;
*)
	echo "usage: $0 build|run [DIR]" >&2
	exit 2
	;;
esac

dir=$(cd "$dir" && pwd)
out=${OUT:-/tmp/multigpu-out}
work=${WORK:-/tmp/tandem-multigpu}
mkdir -p "$out" "$work"
report=$out/report.md
: >"$report"
deadline=$(($(date +%s) + ${BUDGET:-360}))

say() { printf '%s\n' "$*" | tee -a "$report"; }

# limit CAP prints the seconds a step may take: CAP, or what is left of the
# budget, or 0 when too little is left to start.
limit() {
	left=$((deadline - $(date +%s)))
	if [ "$left" -lt 15 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

# step CAP LOG CMD... runs CMD with its output in $out/LOG under the
# budget; its status is in $rc (124: out of time, skip: not started).
step() {
	cap=$(limit "$1")
	log=$out/$2
	shift 2
	if [ "$cap" -eq 0 ]; then
		echo "skipped: the time budget is spent" >"$log"
		rc=skip
		return
	fi
	rc=0
	timeout "$cap" "$@" >"$log" 2>&1 || rc=$?
}

# status LOG says how a step that did not succeed ended, from its log.
status() {
	[ "$rc" != 0 ] || return 0
	say "exit status $rc; the end of $1:"
	say '```'
	tail -4 "$out/$1" | cut -c1-300 | tee -a "$report"
	say '```'
}

for f in engine.test cuda.test synthmodel gpubench factory-eagle3-F16.gguf vocab-qwen3.gguf; do
	gunzip -c "$dir/$f.gz" >"$work/$f"
done
chmod +x "$work/engine.test" "$work/cuda.test" "$work/synthmodel" "$work/gpubench"
# The tests find ../shared beside the repository (read-only where it exists).
cd "$root"
mkdir -p ../shared/models ../shared/oracle 2>/dev/null || true
link() { [ -e "$2/$(basename "$1")" ] || ln -s "$1" "$2/" || echo "cannot link $1 into $2" >&2; }
link "$dir/oracle.json" ../shared/oracle
link "$work/factory-eagle3-F16.gguf" ../shared/models
link "$root/assets/factory-target-Q4_K_M.gguf" ../shared/models
link "$root/assets/factory-draft-Q8_0.gguf" ../shared/models

ngpu=0
if command -v nvidia-smi >/dev/null 2>&1; then
	ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
model=$work/qwen3-8b-Q4_K_M.gguf
if [ "$ngpu" -gt 0 ] && [ ! -f "$model" ]; then
	("$work/synthmodel" -shape qwen3-8b -type Q4_K_M -vocab "$work/vocab-qwen3.gguf" -o "$model.part" &&
		mv "$model.part" "$model") >"$out/synthmodel.log" 2>&1 &
	synth=$!
fi
# Every process's memory on every GPU, five times a second.
if [ "$ngpu" -gt 0 ]; then
	nvidia-smi --query-gpu=index,uuid --format=csv,noheader >"$out/gpu-uuids.csv"
	(while :; do
		nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits
		sleep 0.2
	done) >"$out/gpu-apps.csv" 2>&1 &
	sampler=$!
	trap 'kill $sampler ${synth:-} 2>/dev/null || true' EXIT
fi
engine=$work/engine.test
cudatest=$work/cuda.test
tcuda=-engine.backend=cuda
[ "$ngpu" -gt 0 ] || tcuda=-engine.backend=cpu

say "# Tandem on $ngpu GPU(s), $(date -u '+%Y-%m-%d %H:%M UTC')"
say ""
say "## 1. Inventory"
if [ "$ngpu" -eq 0 ]; then
	say "No GPU (nvidia-smi missing or lists none): the placement tests run on CPU virtual devices; memory, speed and peer copies are skipped."
else
	say '```'
	nvidia-smi --query-gpu=index,name,memory.total,memory.used,pci.bus_id,driver_version,compute_cap --format=csv 2>&1 | tee -a "$report"
	nvidia-smi topo -m 2>&1 | tee -a "$report"
	say '```'
	nvidia-smi nvlink -s >"$out/nvlink.log" 2>&1 || true
	say "NVLink links up: $(awk '/^GPU/ { g = $2 } /Link [0-9]+:/ && !/inactive/ { n[g]++ } END { for (k in n) printf "GPU %s %d; ", k, n[k] }' "$out/nvlink.log")(nvlink.log)"
	[ "$ngpu" -ge 2 ] || say "One GPU: every step runs on it alone; the two-GPU rows are skipped."
fi
say "tandem devices: not built (the tandem binary needs cgo for Fyne and NVML; a CGO_ENABLED=0 build has no NVML and lists no GPUs). The CUDA driver's view, from kernels/cuda's tests:"
# 90 s: a fresh machine's driver compiles the PTX at the first open (25-35 s
# on an H200, kernels/cuda/NOTES.md, htp2).
step 90 copy-tests.log "$cudatest" -test.v -test.run '^(TestOpen|TestCopyFromOrdered|TestAllReduce|TestAllReduceOpenRound)$'
say '```'
grep -E 'cuda_test|peer_test|backend_test|^(ok|PASS|FAIL)|--- ' "$out/copy-tests.log" | sed 's/^ *//' | tee -a "$report"
say '```'
status copy-tests.log

say ""
say "## 2. Placement tests, greedy output against one device"
say "Virtual devices 0, 1, 2 on the GPUs listed (-engine.gpus); the target is the Q4_K_M demo target widened to F16."
say ""
say "| test | layout | devices 0,1,2 on GPUs | result |"
say "|---|---|---|---|"
placed() { # MAPPING TESTS LOG CAP
	step "$4" "$3" "$engine" $tcuda -engine.gpus="$1" -engine.placed-target=factory-target-Q4_K_M.gguf -test.v -test.run "$2"
	label=$1
	[ "$ngpu" -gt 0 ] || label="none (CPU)"
	awk -v m="$label" -v rc="$rc" '
		/^ +--- (PASS|FAIL|SKIP): Test[^\/]+\// {
			split($3, p, "/"); name = p[2]; gsub(/_/, " ", name); r = $2; sub(/:$/, "", r)
			printf "| %s | %s | %s | %s |\n", p[1], name, m, r; n++
			if (r == "FAIL") subfail[p[1]] = 1 }
		/^--- FAIL: Test[^\/]+ / { fails[$3] = 1 }
		END {
			for (t in fails) if (!(t in subfail)) printf "| %s | (whole test) | %s | FAIL |\n", t, m
			if (rc == "skip") printf "| (run) | skipped: the time budget is spent | %s | - |\n", m
			else if (rc != 0) printf "| (run) | exit status %s%s | %s | FAIL |\n", rc, rc == 124 ? ", out of time" : "", m
			if (n == 0 && rc == 0) printf "| (run) | no subtest ran | %s | - |\n", m
		}' "$out/$3" | tee -a "$report"
	status "$3"
}
if [ "$ngpu" -ge 2 ]; then
	placed 0,1,1 '^TestPlaced(TargetLayouts|PairIsTheTargets|Eagle3IsTheTargets)$' placed-011.log 150
else
	placed 0 '^TestPlaced(TargetLayouts|PairIsTheTargets|Eagle3IsTheTargets)$' placed-0.log 150
fi

say ""
say "## 3. Peer copies (CopyFrom: events on both streams, cuMemcpyPeerAsync) and the on-device all-reduce"
if [ "$ngpu" -ge 2 ]; then
	step 60 peer-bench.log "$cudatest" -test.run '^$' -test.v -test.bench '^Benchmark(PeerCopy|CopyFrom|AllReduce)$' -test.benchtime 200x
	say "BenchmarkCopyFrom is 8 KiB between two virtual devices of GPU 0, for comparison. BenchmarkAllReduce: 32 reduces of"
	say "rows x 4096 F32 back to back on both devices (a tensor split's exchange; a tensor split of the 8B makes 72 a token);"
	say "its bytes are what one device reads and writes; us is per reduce."
	say ""
	say "| copy or reduce | GB/s | us per copy or reduce |"
	say "|---|---|---|"
	awk '/^Benchmark/ && /MB\/s/ {
		name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
		us = 0
		for (i = 3; i < NF; i++) { if ($(i+1) == "ns/op") ns = $i; if ($(i+1) == "MB/s") mbs = $i; if ($(i+1) == "us/reduce") us = $i }
		printf "| %s | %.1f | %.1f |\n", name, mbs / 1e3, us > 0 ? us : ns / 1e3 }' "$out/peer-bench.log" | tee -a "$report"
	grep -E 'can reach|needs two|no CUDA' "$out/peer-bench.log" | sed 's/^ *//' | sort -u | tee -a "$report"
	status peer-bench.log
else
	say "skipped: needs two GPUs"
fi

say ""
say "## 4. Qwen3-8B-shaped Q4_K_M: tokens/s (pp512, tg128) against llama.cpp on the same two H200s"
# The model is made while the steps above run; wait for it within the budget.
while [ -n "${synth:-}" ] && kill -0 "$synth" 2>/dev/null && [ "$(limit 1)" -gt 0 ]; do
	sleep 1
done
if [ "$ngpu" -eq 0 ] || [ ! -f "$model" ]; then
	say "skipped: no GPU or no model ($(tail -1 "$out/synthmodel.log" 2>/dev/null || echo 'not made'))"
else
	say "gpubench (one GPU, the unplaced single-device path; its own columns):"
	step 90 gpubench.log "$work/gpubench" -backend cuda -gpu 0 -r 3 -header -model "$model" -anchor-pp 9449 -anchor-tg 255
	grep '^|' "$out/gpubench.log" | tee -a "$report" || true
	status gpubench.log
	gpus=0,1
	[ "$ngpu" -ge 2 ] || gpus=0
	step 180 headmodes.log "$engine" $tcuda -engine.gpus=$gpus -engine.bench-model="$model" -test.run '^$' -test.bench '^BenchmarkHeadModes$' -test.benchtime 3x
	say ""
	say "engine.BenchmarkHeadModes, virtual devices 0, 1 on GPUs $gpus (3 runs after a warm-up):"
	say ""
	say "| layout | prefill tok/s | llama.cpp | decode tok/s | llama.cpp | MiB dev 0 / dev 1 (head) |"
	say "|---|---|---|---|---|---|"
	awk '/^BenchmarkHeadModes\// {
		name = $1; sub(/^BenchmarkHeadModes\//, "", name); sub(/-[0-9]+$/, "", name)
		pp = tg = d0 = d1 = h0 = h1 = "-"
		for (i = 3; i < NF; i++) {
			u = $(i+1)
			if (u == "pp-tok/s") pp = sprintf("%.0f", $i); if (u == "tok/s") tg = sprintf("%.0f", $i)
			if (u == "MiB-dev0") d0 = sprintf("%.0f", $i); if (u == "MiB-dev1") d1 = sprintf("%.0f", $i)
			if (u == "head-MiB-dev0") h0 = sprintf("%.0f", $i); if (u == "head-MiB-dev1") h1 = sprintf("%.0f", $i)
		}
		app = "9,449"; atg = "255"
		if (name ~ /^layer/) { app = "9,673"; atg = "254" }
		if (name ~ /^tensor/) { app = "13,581"; atg = "265" }
		printf "| %s | %s | %s | %s | %s | %s (%s) / %s (%s) |\n", name, pp, app, tg, atg, d0, h0, d1, h1 }' "$out/headmodes.log" | tee -a "$report"
	status headmodes.log
fi

say ""
say "## 5. Per-GPU memory: plan against nvidia-smi (peak of the test process), context 640, batch 512"
if [ "$ngpu" -lt 2 ] || [ ! -f "$model" ]; then
	say "skipped: needs two GPUs and the model"
else
	say "| layout | GPU | plan MiB (of which context) | backend accounted MiB | nvidia-smi peak MiB | measured / plan | llama.cpp peak MiB |"
	say "|---|---|---|---|---|---|---|"
	for layout in layer tensor; do
		cap=$(limit 90)
		if [ "$cap" -eq 0 ]; then
			say "| $layout | - | skipped: the time budget is spent | | | | |"
			continue
		fi
		rc=0
		# sh records its pid and becomes the test process, whose pid
		# nvidia-smi lists.
		timeout "$cap" sh -c 'echo $$ >"$0"; exec "$@"' "$work/memory.pid" "$engine" $tcuda -engine.bench-model="$model" \
			-test.v -test.run "^TestGPUMemoryPlacedMatchesPlan\$/^$layout\$" >"$out/memory-$layout.log" 2>&1 || rc=$?
		pid=$(cat "$work/memory.pid")
		sleep 0.5
		awk -F', *' -v pid="$pid" -v layout="$layout" '
			FILENAME ~ /uuids/ { gpu[$2] = $1; next }
			FILENAME ~ /apps/ { if ($1 == pid && $3 + 0 > peak[gpu[$2]]) peak[gpu[$2]] = $3 + 0; next }
			/^GPUMEM/ {
				split($0, w, " "); g = w[4]
				match($0, /plan [0-9]+/); plan[g] = substr($0, RSTART + 5, RLENGTH - 5)
				match($0, /\+ [0-9]+ context/); ctx[g] = substr($0, RSTART + 2, RLENGTH - 10)
				match($0, /holds [0-9]+/); held[g] = substr($0, RSTART + 6, RLENGTH - 6)
			}
			END {
				ll[0] = layout == "layer" ? "2,865" : "3,993"; ll[1] = layout == "layer" ? "3,349" : "3,993"
				for (g = 0; g < 2; g++) {
					if (!(g in plan)) { printf "| %s | %d | no plan printed | | | | %s |\n", layout, g, ll[g]; continue }
					ratio = peak[g] > 0 ? sprintf("%+.1f%%", 100 * (peak[g] * 1048576 / plan[g] - 1)) : "-"
					printf "| %s | %d | %.0f (%.0f) | %.0f | %s | %s | %s |\n", layout, g, plan[g] / 1048576, ctx[g] / 1048576,
						held[g] / 1048576, (peak[g] > 0 ? peak[g] : "not seen"), ratio, ll[g]
				}
			}' "$out/gpu-uuids.csv" "$out/gpu-apps.csv" "$out/memory-$layout.log" | tee -a "$report"
		echo "$rc" >"$work/memory-$layout.rc"
	done
	for layout in layer tensor; do
		rc=$(cat "$work/memory-$layout.rc" 2>/dev/null || echo skip)
		grep -q '^GPUMEM' "$out/memory-$layout.log" 2>/dev/null || [ "$rc" != 0 ] || rc="0, but no GPUMEM line"
		[ "$rc" = skip ] || status "memory-$layout.log"
	done
fi

say ""
say "## 6. Placement tests, draft on GPU 0 beside a target on GPUs 0-1"
if [ "$ngpu" -ge 2 ]; then
	say "| test | layout | devices 0,1,2 on GPUs | result |"
	say "|---|---|---|---|"
	placed 0,1,0 '^TestPlaced(PairIsTheTargets|Eagle3IsTheTargets)$' placed-010.log 120
else
	say "skipped: needs two GPUs"
fi
say ""
say "budget left: $((deadline - $(date +%s))) s of ${BUDGET:-360}; logs in $out"
