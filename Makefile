# agentwire — see README.md.
GO ?= go
FUZZTIME ?= 30s
CHROMIUM ?= /usr/bin/chromium

.PHONY: run test generate vet fuzz bench bench-e2e lint chatui-e2e playground-e2e

## run: start the server on the embedded defaults (127.0.0.1:8080, SQLite in ./data);
## flags go in ARGS: make run ARGS='--addr 127.0.0.1:9090 --approval-policy auto-edit'
run:
	$(GO) run ./cmd/server $(ARGS)

## test: every test, with the race detector (a generous timeout: a busy
## two-core machine compiles and runs them all at once)
test:
	$(GO) test -race -count=1 -timeout 30m ./...

## generate: regenerate generated/ from schemas/ and asyncapi/
generate:
	$(GO) generate ./...

vet:
	$(GO) vet ./...

## fuzz: run every decoder fuzz target for FUZZTIME each (see .ci/fuzz)
fuzz:
	GO=$(GO) bash .ci/fuzz $(FUZZTIME)

## bench: the benchmarks behind docs/BENCHMARKS.md
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/...

## bench-e2e: agentwire end to end against a naive relay, one table (cmd/loadgen; a few
## minutes; LOADGEN_FLAGS=-quick for a run of seconds; with AGENTWIRE_TEST_POSTGRES_URL
## set it adds the PostgreSQL store's append vs raw COPY)
bench-e2e:
	$(GO) run ./cmd/loadgen $(LOADGEN_FLAGS)

## chatui-e2e: ChatUI-shaped flows in headless Chromium against a real
## server (needs chromium and npm; CHROMIUM names the browser)
chatui-e2e:
	cd .ci/chatui && npm ci --no-audit --no-fund --loglevel=error && CHROMIUM=$(CHROMIUM) node --test

## playground-e2e: the playground page (/) over every protocol in headless Chromium
## against a real server (needs chromium and npm; CHROMIUM names the browser;
## screenshots go to SHOTS, .ci/playground/shots by default)
playground-e2e:
	cd .ci/playground && npm ci --no-audit --no-fund --loglevel=error && CHROMIUM=$(CHROMIUM) node --test

## lint: the schema document linters CI runs, and tsc on the generated TypeScript and the
## playground's scripts (needs npm)
lint:
	cd .ci/lint && npm ci --no-audit --no-fund --loglevel=error
	node .ci/lint/validate-asyncapi.mjs asyncapi/*.yaml
	.ci/lint/node_modules/.bin/spectral lint --ruleset .ci/lint/.spectral.yaml --fail-severity=error asyncapi/*.yaml schemas/openapi/threads.yaml schemas/openapi/ag2.yaml
	.ci/lint/node_modules/.bin/tsc --noEmit -p generated/ts
	.ci/lint/node_modules/.bin/tsc -p internal/playground/static
