#!/bin/sh
# Regenerates ptx/*.ptx from src/*.cu (run by `go generate`; needs nvcc and
# ptxas from CUDA 12 or later, which exist only on a machine with a GPU).
#
# The PTX targets compute_75 (Turing and later). nvcc writes its own PTX ISA
# version; the .version line is then lowered to the oldest version ptxas
# still accepts for this code, so that older drivers can JIT it too.
set -eu
cd "$(dirname "$0")"
mkdir -p ptx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for src in src/*.cu; do
	name=$(basename "$src" .cu)
	rm -f "ptx/$name.ptx"
	nvcc -ptx -arch=compute_75 -O3 -std=c++17 -o "$tmp/$name.ptx" "$src"
	for v in 6.4 6.5 7.0 7.1 7.2 7.3 7.4 7.5 7.6 7.7 7.8 8.0 8.1 8.2 8.3 8.4 8.5 8.6 8.7 8.8 9.0; do
		sed "s/^\.version .*/.version $v/" "$tmp/$name.ptx" >"$tmp/try.ptx"
		if ptxas -arch=sm_75 -o /dev/null "$tmp/try.ptx" 2>/dev/null; then
			mv "$tmp/try.ptx" "ptx/$name.ptx"
			echo "ptx/$name.ptx: .version $v"
			break
		fi
	done
	[ -f "ptx/$name.ptx" ] || { echo "gen.sh: ptxas rejects $name.ptx" >&2; exit 1; }
done
