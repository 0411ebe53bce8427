GO ?= go

.PHONY: test bench fuzz vet cross

# test: what CI runs (README's test command). The timeout is per package,
# sized for a loaded 2-core machine (the default 10 minutes is not; under
# a load average of 30 fsbackend alone took 30 min).
TESTTIMEOUT ?= 45m
test: vet cross
	$(GO) test -race -count=1 -timeout $(TESTTIMEOUT) ./...
	$(MAKE) test-modules

# MODULES: the modules nested in this repository (framework adapters under
# contrib/, providers whose dependencies the core must not carry, examples
# that need an SDK the core must not carry). Each
# builds alone (GOWORK=off: its replace directive points at this checkout),
# is vetted for macOS and Windows too, and runs its tests.
MODULES := contrib/anthropic contrib/eino contrib/genkit contrib/mcpgo \
	contrib/openai examples/observe provider/k8s
.PHONY: modules
modules:
	@echo $(MODULES)
.PHONY: test-modules
test-modules:
	@set -e; for m in $(MODULES); do \
		echo "== module $$m"; \
		(cd $$m && GOWORK=off $(GO) vet ./... && GOWORK=off GOOS=darwin $(GO) vet ./... && \
			GOWORK=off GOOS=windows $(GO) vet ./... && \
			GOWORK=off $(GO) test -race -count=1 -timeout $(TESTTIMEOUT) ./...); \
	done

vet:
	$(GO) vet ./...

# cross: the module, its tests included, builds and vets for macOS and
# Windows too (provider/local answers ErrUnimplemented there; the memory
# provider and the fakes' host runtime keep to portable syscalls).
cross:
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...

# bench: benchmarks against same-run raw baselines; see bench/README.md.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./bench/...

# fuzz: a short run of every fuzz target.
FUZZTIME ?= 15s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzJail -fuzztime $(FUZZTIME) ./internal/pathsafe
	$(GO) test -run '^$$' -fuzz FuzzOpenAndPaths -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz FuzzJail -fuzztime $(FUZZTIME) ./fsbackend
	$(GO) test -run '^$$' -fuzz FuzzShellQuote -fuzztime $(FUZZTIME) ./provider/daytona
	$(GO) test -run '^$$' -fuzz FuzzJoinPrelude -fuzztime $(FUZZTIME) ./session
	$(GO) test -run '^$$' -fuzz FuzzEventFastPath -fuzztime $(FUZZTIME) ./provider/e2b
