# The two set-up commands of the README live here: `make run` and `make test`.
SHELL := /bin/bash
DEB_PACKAGES := gcc pkg-config libgl1-mesa-dev libxcursor-dev libxrandr-dev libxinerama-dev \
	libxi-dev libxxf86vm-dev libgtk-3-dev xvfb xauth imagemagick x11-utils xdotool
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build run package screenshots test fuzz vet

deps:
	@dpkg -s $(DEB_PACKAGES) >/dev/null 2>&1 || { $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends $(DEB_PACKAGES); }

build: deps
	go build -o tandem .

# The first start opens on the bundled demo pair.
run: build
	./tandem

# dist/Tandem.tar.xz (fyne package) and dist/tandem_VERSION_ARCH.deb (nfpm),
# each checked installed in a temporary prefix.
package: deps
	bash packaging/package.sh

# packaging/screenshots/{main,chat}.png and frames.json, from the real app under Xvfb.
screenshots: deps
	bash packaging/screenshot.sh

vet:
	go vet ./...

# Brief fuzzing of the untrusted-input parsers (longer runs: FUZZTIME=60s).
FUZZTIME ?= 10s
fuzz:
	go test ./engine/gguf -run '^$$' -fuzz FuzzOpen -fuzztime $(FUZZTIME)
	go test ./engine/tokenizer -run '^$$' -fuzz FuzzEncode -fuzztime $(FUZZTIME)

test: deps vet fuzz
	go test -timeout 60m ./...
