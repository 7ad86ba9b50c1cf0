# The commands README.md gives; .ci/run calls `make test`.
.PHONY: test build bench fuzz

test:
	go vet ./...
	go test -race -count=1 ./...

build:
	go build -o bin/firstmate ./cmd/firstmate
	go build -o bin/firstmate-sandbox ./cmd/firstmate-sandbox

bench:
	go test -run '^$$' -bench . -benchmem ./...
