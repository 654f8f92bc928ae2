# The two set-up commands of the README live here: `make run` and `make test`.
SHELL := /bin/bash
DEB_PACKAGES := gcc pkg-config libgl1-mesa-dev libxcursor-dev libxrandr-dev libxinerama-dev \
	libxi-dev libxxf86vm-dev libgtk-3-dev xvfb xauth imagemagick x11-utils xdotool
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build run test fuzz vet

deps:
	@dpkg -s $(DEB_PACKAGES) >/dev/null 2>&1 || { $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends $(DEB_PACKAGES); }

build: deps
	go build -o tandem .

run: build
	./tandem

vet:
	go vet ./...

# Brief fuzzing of the untrusted-input parsers (longer runs: FUZZTIME=60s).
FUZZTIME ?= 10s
fuzz:
	go test ./engine/gguf -run '^$$' -fuzz FuzzOpen -fuzztime $(FUZZTIME)
	go test ./engine/tokenizer -run '^$$' -fuzz FuzzEncode -fuzztime $(FUZZTIME)

test: deps vet fuzz
	go test -timeout 60m ./...
