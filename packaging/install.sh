#!/usr/bin/env bash
# Installs a built tandem binary with its desktop entry and icons under a
# prefix (make install: PREFIX=~/.local), or removes them (--uninstall):
#
#   packaging/install.sh [--uninstall] BINARY PREFIX [DESTDIR]
#
#   PREFIX/bin/tandem
#   PREFIX/share/applications/run.tandem.app.desktop   (Exec= names the binary by its path,
#                                                        so menus find it off the PATH too)
#   PREFIX/share/metainfo/run.tandem.app.metainfo.xml
#   PREFIX/share/icons/hicolor/{16x16,...,512x512,scalable}/apps/run.tandem.app.{png,svg}
#
# DESTDIR, when given, is put before every path written (staging for
# packagers); the desktop entry still names PREFIX/bin/tandem.
set -euo pipefail
cd "$(dirname "$0")/.."
uninstall=
if [ "${1:-}" = --uninstall ]; then
	uninstall=1
	shift
fi
if [ $# -lt 2 ] || [ -z "$2" ]; then
	echo "usage: packaging/install.sh [--uninstall] BINARY PREFIX [DESTDIR]" >&2
	exit 2
fi
bin=$1 prefix=${2%/} dest=${3:-}
id=run.tandem.app
root=$dest$prefix

files=("$root/bin/tandem" "$root/share/applications/$id.desktop" "$root/share/metainfo/$id.metainfo.xml"
	"$root/share/icons/hicolor/scalable/apps/$id.svg")
for png in assets/icons/*x*.png; do
	files+=("$root/share/icons/hicolor/$(basename "$png" .png)/apps/$id.png")
done

if [ -n "$uninstall" ]; then
	rm -f "${files[@]}"
	echo "removed Tandem from $root"
	exit 0
fi

if [ ! -x "$bin" ]; then
	echo "install.sh: $bin is not an executable (make install builds it first)" >&2
	exit 1
fi
install -Dm755 "$bin" "$root/bin/tandem"
install -d "$root/share/applications"
sed "s|^Exec=tandem\$|Exec=$prefix/bin/tandem|" packaging/$id.desktop >"$root/share/applications/$id.desktop"
chmod 644 "$root/share/applications/$id.desktop"
install -Dm644 packaging/$id.metainfo.xml "$root/share/metainfo/$id.metainfo.xml"
install -Dm644 assets/icon.svg "$root/share/icons/hicolor/scalable/apps/$id.svg"
for png in assets/icons/*x*.png; do
	install -Dm644 "$png" "$root/share/icons/hicolor/$(basename "$png" .png)/apps/$id.png"
done

# Desktops watch these folders and show the entry without a cache
# refresh (a cache written into ~/.local would outlive an uninstall).
echo "installed Tandem under $root:"
printf '  %s\n' "${files[@]}"
case ":$PATH:" in
*":$prefix/bin:"*) ;;
*) echo "$prefix/bin is not on your PATH: add it (for ~/.local/bin, log in again on most desktops) to type tandem in a shell" ;;
esac
