# The two set-up commands of the README live here: `make run` and `make test`.
SHELL := /bin/bash
# What building the app needs: a C compiler and the headers of the window's
# libraries (GLFW's X11 and GL, the GTK file chooser).
DEB_PACKAGES := gcc pkg-config libgl1-mesa-dev libxcursor-dev libxrandr-dev libxinerama-dev \
	libxi-dev libxxf86vm-dev libgtk-3-dev
# What only the tests and the screenshots need on top: an X server without
# a screen and the tools that drive and photograph the window. `make run`
# does not install these (they bring systemd and python3 with them).
TEST_PACKAGES := xvfb xauth imagemagick x11-utils xdotool
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# go-nvml calls the NVML functions that CUDA 13's header marks deprecated,
# and gcc warns for each call: about 150 lines on a first build, none of
# them ours to fix. Go has no way to give one dependency's C code its own
# flags (only a package's own #cgo lines do that), so the warning is turned
# off for the cgo builds these targets run. It hides deprecation notices
# only, and only go-nvml's code has any: Fyne's, GLFW's, GTK's and ours
# build without one.
export CGO_CFLAGS := $(or $(CGO_CFLAGS),-O2 -g) -Wno-deprecated-declarations

# Go: the one on PATH when it is 1.21 or newer (such a go fetches the version
# go.mod names through the module proxy by itself); otherwise Debian's 1.23
# from bookworm-backports, which `make deps` installs.
BACKPORTS_GO := /usr/lib/go-1.23/bin/go
GO := $(shell v=$$(go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p'); \
	if [ -n "$$v" ] && [ "$$v" -ge 21 ]; then command -v go; else echo $(BACKPORTS_GO); fi)
# The packaging scripts call plain `go`: the same one. Debian's 1.23 must
# be allowed to fetch the newer toolchain go.mod asks for.
export PATH := $(dir $(GO)):$(PATH)
ifeq ($(GO),$(BACKPORTS_GO))
export GOTOOLCHAIN := auto
endif

.PHONY: deps test-deps build run headless install uninstall package screenshots test fuzz vet vet-headless

deps:
	@dpkg -s $(DEB_PACKAGES) >/dev/null 2>&1 || { $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends $(DEB_PACKAGES); }
	@[ -x "$(GO)" ] || { \
		printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
			| $(SUDO) tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null && \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends -t bookworm-backports golang-1.23-go; }

test-deps: deps
	@dpkg -s $(TEST_PACKAGES) >/dev/null 2>&1 || { $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends $(TEST_PACKAGES); }

build: deps
	$(GO) build -o tandem .

# The first start opens on the bundled demo pair.
run: build
	./tandem

# Every command but the window, without cgo: no GTK, X or GL libraries, for
# GPU servers (README: On a GPU server). Needs only Go.
headless:
	CGO_ENABLED=0 $(GO) build -tags headless -o tandem-headless .

# The binary, its desktop entry and icons under PREFIX (default ~/.local:
# no root needed; its bin/ is on the PATH of most desktops' sessions).
# DESTDIR stages them elsewhere, as packagers do.
PREFIX ?= $(HOME)/.local
install: build
	bash packaging/install.sh tandem "$(PREFIX)" "$(DESTDIR)"

uninstall:
	bash packaging/install.sh --uninstall tandem "$(PREFIX)" "$(DESTDIR)"

# dist/Tandem.tar.xz (fyne package) and dist/tandem_VERSION_ARCH.deb (nfpm),
# each checked installed in a temporary prefix.
package: deps
	bash packaging/package.sh

# packaging/screenshots/{main,chat}.png and frames.json, from the real app under Xvfb.
screenshots: test-deps
	bash packaging/screenshot.sh

vet:
	$(GO) vet ./...

# The headless build type-checks, and says it has no window.
vet-headless:
	CGO_ENABLED=0 $(GO) vet -tags headless ./...
	CGO_ENABLED=0 $(GO) test -tags headless ./app -run Headless
	@! CGO_ENABLED=0 $(GO) list -tags headless -deps . | grep '^fyne\.io/' || { echo "the headless build depends on Fyne" >&2; exit 1; }

# Brief fuzzing of the untrusted-input parsers, the HTTP handlers and the
# grammar compiler. Each target runs a fixed number of inputs (3-20
# seconds each on a 2-core machine), not a duration: when a -fuzztime
# duration ends, go1.26's fuzzing coordinator can report its own deadline as a
# failure with no failing input ("context deadline exceeded",
# go.dev/issue/75804, fixed in go1.27). Longer runs: FUZZTIME=200000x (or a
# duration such as 60s, which may end in that spurious failure).
fuzz:
	$(GO) test ./engine/gguf -run '^$$' -fuzz FuzzOpen -fuzztime $(or $(FUZZTIME),200000x)
	$(GO) test ./engine/model -run '^$$' -fuzz FuzzLoadHeader -fuzztime $(or $(FUZZTIME),5000x)
	$(GO) test ./engine/chat -run '^$$' -fuzz FuzzRender -fuzztime $(or $(FUZZTIME),40000x)
	$(GO) test ./engine/serve -run '^$$' -fuzz FuzzHandlers -fuzztime $(or $(FUZZTIME),8000x)
	$(GO) test ./engine/grammar -run '^$$' -fuzz FuzzGrammar -fuzztime $(or $(FUZZTIME),60000x)

test: test-deps vet vet-headless fuzz
	$(GO) test -timeout 60m ./...
