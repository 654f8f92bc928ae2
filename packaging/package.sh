#!/usr/bin/env bash
# Builds Tandem's Linux packages into dist/ and checks each one installed:
#   dist/Tandem.tar.xz   fyne package's bundle (binary, .desktop entry, icon,
#                        and a Makefile that installs them under a prefix)
#   dist/tandem_V_ARCH.deb   the same files the Debian way, made by nfpm
# Each is installed into a temporary prefix and its binary must run the
# bundled demo pair headless (tandem run), describe it (tandem info) and
# list the GPUs (tandem devices, which loads NVML).
set -euo pipefail
cd "$(dirname "$0")/.."
dist=$PWD/dist # nfpm.yaml names dist/tandem
version=$(sed -n 's/^ *Version = "\(.*\)"/\1/p' FyneApp.toml)
arch=$(go env GOARCH)
fyne=(go run fyne.io/tools/cmd/fyne@v1.7.4)
nfpm=(go run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2)
mkdir -p "$dist"

# go-nvml leaves the NVML symbols to be bound lazily, so that a machine
# without the driver can still start. fyne package links with -z now, which
# makes such a binary die at start ("undefined symbol: nvml..."): the binary
# is built here with -z lazy and handed to fyne package as it is.
echo "== go build"
go build -ldflags="-s -w -extldflags=-Wl,-z,lazy" -o "$dist/tandem" .

echo "== fyne package"
rm -f Tandem.tar.xz
# A --release package bumps Build in FyneApp.toml; the version is kept in
# git, so the file is put back as it was.
cp FyneApp.toml "$dist/FyneApp.toml.orig"
"${fyne[@]}" package --target linux --executable "$dist/tandem" --release
mv "$dist/FyneApp.toml.orig" FyneApp.toml
mv Tandem.tar.xz "$dist/"

echo "== nfpm"
rm -f "$dist"/tandem_*.deb
VERSION=$version ARCH=$arch "${nfpm[@]}" package --packager deb --config packaging/nfpm.yaml --target "$dist/"

# check BIN: the installed binary runs the demo pair and describes it.
check() {
	local bin=$1 cache
	cache=$(mktemp -d)
	XDG_CACHE_HOME=$cache "$bin" run --chat "Quote Genesis 1:3." -n 12 >"$cache/out.txt" 2>"$cache/err.txt"
	grep -q "demo pair" "$cache/err.txt"
	echo "   run: $(head -c 120 "$cache/out.txt" | tr '\n' ' ')"
	"$bin" info "$cache/tandem/demo/factory-target-Q4_K_M.gguf" | sed 's/^/   /' | head -4
	# NVML's symbols bind lazily: with no driver this says so instead of dying.
	"$bin" devices | sed 's/^/   devices: /' | head -2
	rm -rf "$cache"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== install Tandem.tar.xz into $tmp/tar"
mkdir -p "$tmp/tar-src"
tar -xJf "$dist/Tandem.tar.xz" -C "$tmp/tar-src"
make -s -C "$tmp/tar-src/tandem" install DESTDIR="$tmp/tar" PREFIX=/usr >/dev/null
find "$tmp/tar" -type f | sed "s|$tmp/tar|   |"
check "$tmp/tar/usr/bin/tandem"

echo "== install the .deb into $tmp/deb"
deb=$(ls "$dist"/tandem_*.deb)
dpkg-deb --extract "$deb" "$tmp/deb"
dpkg-deb --info "$deb" | sed -n 's/^ *\(Package\|Version\|Architecture\|Depends\): /   \1: /p'
check "$tmp/deb/usr/bin/tandem"
echo "== ok: $(cd "$dist" && ls Tandem.tar.xz tandem_*.deb | tr '\n' ' ')"
