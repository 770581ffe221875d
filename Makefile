# crffd build targets. `make build` puts crffd and every plugin in ./bin.
GO      ?= go
# The version crffd version prints: git describe, or "dev" outside a clone.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     ?= bin
PROTOC  ?= protoc
GOBIN   := $(shell $(GO) env GOPATH)/bin

.PHONY: build test check generate clean soak deb

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/ ./cmd/crffd ./plugins/kernels/... ./plugins/transport/...

test:
	$(GO) test ./...

# The Debian package: crffd and its plugins, stripped, under /usr, with
# hardened systemd units (packaging/deb). Its version is the last commit's
# date and hash, which Debian orders by date.
DEB_VERSION ?= 0.0~git$(shell git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || date +%Y%m%d).$(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DEB_BIN     ?= $(BIN)/deb
deb:
	$(GO) build -trimpath -buildmode=pie -ldflags "-s -w -X main.version=$(VERSION)" -o $(DEB_BIN)/ ./cmd/crffd ./plugins/kernels/... ./plugins/transport/...
	sh packaging/deb/build.sh "$(DEB_VERSION)" "$(DEB_BIN)" "$(BIN)"

# The static checks CI runs before the tests.
check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GOBIN)/staticcheck ./...

# Regenerate the committed protobuf code. Needs Debian's protobuf-compiler
# and: go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#      go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
generate:
	PATH="$(GOBIN):$$PATH" $(PROTOC) --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative \
		$$(git ls-files '*.proto')

clean:
	rm -rf $(BIN)

# The soak test of issue 15: a coordinator and 5 site daemons with rows
# changing and daemons killed, for DURATION (make soak DURATION=30m).
DURATION ?= 30m
soak:
	CRFFD_SOAK=$(DURATION) $(GO) test -count=1 -run TestSoak -v -timeout 0 ./e2e
