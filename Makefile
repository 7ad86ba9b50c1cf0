# The commands README.md gives; .ci/run calls `make lint` and `make test`.
.PHONY: test lint build bench fuzz check-deploy release

test:
	go vet ./...
	go test -race -count=1 ./...
	$(MAKE) check-deploy

build:
	go build -o bin/firstmate ./cmd/firstmate
	go build -o bin/firstmate-sandbox ./cmd/firstmate-sandbox

bench:
	go test -run '^$$' -bench . -benchmem ./...

# Every fuzz target of the module for FUZZTIME each (make fuzz FUZZTIME=5m
# for a longer run). go test -fuzz takes one package and one target a run,
# so the targets are found in the packages' test files.
FUZZTIME ?= 10s

fuzz:
	set -e; go list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do \
		for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$dir"/*_test.go 2>/dev/null); do \
			echo "fuzz: $$pkg $$f"; \
			go test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
		done; \
	done

# Formatting and staticcheck, which .ci/run runs before the tests.
# staticcheck runs from the module proxy at a fixed version, so that go.mod
# does not depend on it.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then \
		echo "gofmt -l: these files need gofmt -w:"; echo "$$unformatted"; exit 1; fi
	go run $(STATICCHECK) ./...
	cd deploy/check && go run $(STATICCHECK) ./...

# What deploy/ ships (Dockerfile, compose file, Helm chart, seccomp profile,
# systemd unit), checked by a module of its own so that the main module
# does not depend on BuildKit, Helm and Kubernetes.
check-deploy:
	cd deploy/check && go vet ./... && go test -count=1 ./...

# Static binaries for Linux, stamped with the version, in dist/OS-ARCH/
# (firstmate-sandbox beside firstmate, where firstmate looks for it), and
# dist/SHA256SUMS (check with: cd dist && sha256sum -c SHA256SUMS).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
RELEASE_PLATFORMS := linux/amd64 linux/arm64

release:
	rm -rf dist
	set -e; for p in $(RELEASE_PLATFORMS); do \
		for cmd in firstmate firstmate-sandbox; do \
			CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build -trimpath \
				-ldflags "-s -w -X main.version=$(VERSION)" \
				-o dist/$${p%/*}-$${p#*/}/$$cmd ./cmd/$$cmd; \
		done; \
	done
	cd dist && sha256sum */firstmate* > SHA256SUMS
