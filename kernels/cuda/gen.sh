#!/bin/sh
# Regenerates the PTX under ptx/ from src/*.cu (run by `go generate`; needs
# nvcc and ptxas from CUDA 11.8 or later: compute_90 and griddepcontrol need
# PTX ISA 7.8). No GPU is needed; the committed PTX comes from nvcc 11.8
# (kernels/cuda/NOTES.md, call 22: decode as fast as with nvcc 13's).
#
# ptx/*.ptx targets compute_75 (Turing and later). ptx/sm90/*.ptx is the
# Hopper variant: the same sources compiled for compute_90, where every
# kernel opens with griddepcontrol (programmatic dependent launch, see
# grid_dep_begin in src/common.cuh). ptx/sm90a/*.ptx holds src/sm90a/*.cu,
# kernels on Hopper's wgmma, which only sm_90a has (the backend loads them
# on compute capability 9.0 alone). nvcc writes its own PTX ISA version;
# the .version line is then lowered to the oldest version ptxas still
# accepts for the code, so that older drivers can JIT it too.
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# build ARCH DIR VERSIONS...: src/*.cu for compute_ARCH into DIR.
build() {
	arch=$1 dir=$2
	shift 2
	mkdir -p "$dir"
	for src in src/*.cu; do
		name=$(basename "$src" .cu)
		rm -f "$dir/$name.ptx"
		nvcc -ptx -arch="compute_$arch" -O3 -std=c++17 -o "$tmp/$name.ptx" "$src"
		for v in "$@"; do
			sed "s/^\.version .*/.version $v/" "$tmp/$name.ptx" >"$tmp/try.ptx"
			if ptxas -arch="sm_$arch" -o /dev/null "$tmp/try.ptx" 2>/dev/null; then
				mv "$tmp/try.ptx" "$dir/$name.ptx"
				echo "$dir/$name.ptx: .version $v"
				break
			fi
		done
		[ -f "$dir/$name.ptx" ] || { echo "gen.sh: ptxas rejects $dir/$name.ptx" >&2; exit 1; }
	done
}

build 75 ptx 6.4 6.5 7.0 7.1 7.2 7.3 7.4 7.5 7.6 7.7 7.8 8.0 8.1 8.2 8.3 8.4 8.5 8.6 8.7 8.8 9.0
build 90 ptx/sm90 7.8 8.0 8.1 8.2 8.3 8.4 8.5 8.6 8.7 8.8 9.0

# src/sm90a for sm_90a, PTX ISA 8.0 (the first with wgmma). nvcc 11.8 knows
# no compute_90a: the sources are compiled for compute_90 (the inline wgmma
# passes through as text) and the target is then named sm_90a. ptxas checks
# the result where it knows sm_90a (CUDA 12 and later); 11.8's cannot, and
# the driver compiles the PTX when the backend loads it.
mkdir -p ptx/sm90a
for src in src/sm90a/*.cu; do
	name=$(basename "$src" .cu)
	nvcc -ptx -arch=compute_90 -O3 -std=c++17 -o "$tmp/$name.ptx" "$src"
	sed -e 's/^\.version .*/.version 8.0/' -e 's/^\.target sm_90$/.target sm_90a/' "$tmp/$name.ptx" >"ptx/sm90a/$name.ptx"
	if ptxas --help | grep -q "'sm_90a'"; then
		ptxas -arch=sm_90a -o /dev/null "ptx/sm90a/$name.ptx" || { echo "gen.sh: ptxas rejects ptx/sm90a/$name.ptx" >&2; exit 1; }
		echo "ptx/sm90a/$name.ptx: .version 8.0, checked"
	else
		echo "ptx/sm90a/$name.ptx: .version 8.0, not checked (this ptxas has no sm_90a)"
	fi
done
