GO ?= go

.PHONY: test bench fuzz vet cross

# FIRST: the packages whose tests take longest, slowest first; go test
# starts packages in the order given (-p at once, two on a 2-core host),
# so starting these ahead of ./... keeps the run from ending on one long
# package with a CPU idle (measured on the inner loop: 386 s → 360 s;
# ./... adds nothing twice). By the package times of the last runs.
FIRST := ./provider/local ./fsbackend ./provider/daytona ./provider/docker \
	./provider/e2b ./interp ./run ./cmd/sandbox

# test: what CI runs (README's test command). The timeout is per package,
# sized for a loaded 2-core machine (the default 10 minutes is not; under
# a load average of 30 fsbackend alone took 30 min).
TESTTIMEOUT ?= 45m
# The three vets (Linux, and the cross builds for macOS and Windows) run
# at once: see VET3.
# RACEENV: a race-built program sleeps a second as it exits (GORACE's
# atexit_sleep_ms, default 1000, a window for goroutines still running to
# report). The test binaries re-run themselves as sandbox agents, CLI
# children and helpers, and tests wait on those exits: the sleep added
# 13 s to cmd/sandbox alone. The tests check that no goroutine outlives
# them (goleak), so the window has nothing to catch. A GORACE of your own
# is kept, after it.
RACEENV = GORACE="atexit_sleep_ms=0 $${GORACE:-}"
# HELPERTAGS: the local provider's helpers (spawner, sandbox agents,
# egress proxies) are the test binary re-executed, race-built like it: the
# race runtime's start cost each about 0.1 s of CPU, a third of the CPU of
# a sandbox's life (25 sandboxes: 7.8 -> 5.2 CPU-s), and their race
# reports reach no test. The tests start them instead from
# internal/localhelper built plainly once per run, in a directory every
# sandbox user can search; only builds with the tag read
# SANDBOXKIT_TEST_HELPER.
#
# The nested modules (test-modules) start their sandboxes from the same
# helper, and start once MODULESAFTER, the last package of FIRST, has
# printed its result: go test prints each package's result in the order
# given, so the line comes when every package of FIRST has ended. From
# there the main module runs its small packages, whose tests mostly wait,
# and left a CPU idle for half of its last two minutes; the modules fill
# it. (Started with the main module, they slowed its long packages as
# much as they gained; started after provider/e2b, they doubled
# cmd/sandbox's time and the run ended 14 s later.) Their output follows
# the main module's.
HELPERTAGS = sandboxkit_testhelper
MODULESAFTER = $(lastword $(FIRST:./%=%))
test:
	@$(VET3)
	@h=$$(mktemp -d /tmp/sandboxkit-helper.XXXXXX) && chmod 755 "$$h" && \
	$(GO) build -o "$$h/localhelper" ./internal/localhelper || { rm -rf "$$h"; exit 1; }; \
	export SANDBOXKIT_TEST_HELPER="$$h/localhelper"; \
	modules() { $(MAKE) --no-print-directory test-modules > "$$h/modules.out" 2>&1; echo $$? > "$$h/modules.rc"; }; \
	{ $(RACEENV) $(GO) test -race -tags $(HELPERTAGS) -count=1 -timeout $(TESTTIMEOUT) $(FIRST) ./... 2>&1; echo $$? > "$$h/main.rc"; } | \
	{ mp=; while IFS= read -r line; do \
		printf '%s\n' "$$line"; \
		case $$line in ok*/$(MODULESAFTER)[[:space:]]*|FAIL*/$(MODULESAFTER)[[:space:]]*) [ -n "$$mp" ] || { modules & mp=$$!; } ;; esac; \
	  done; \
	  if [ -n "$$mp" ]; then wait $$mp; else modules; fi; }; \
	cat "$$h/modules.out"; rc=$$(cat "$$h/main.rc"); mrc=$$(cat "$$h/modules.rc"); \
	rm -rf "$$h"; [ "$$rc" = 0 ] && [ "$$mrc" = 0 ]

# test-short: the inner loop while changing code (README's Testing): every
# behaviour, with the stress and fault repetitions cut (testing.Short).
# SHORTP packages run at once, twice the CPUs (go test's default is one a
# CPU): their tests mostly wait on sandboxes, timeouts and other
# processes, and with one package a CPU the CPUs idled a fifth of the run
# (measured on 2 cores: 350 s -> 288 s, the same tests passing).
SHORTP ?= $(shell n=$$(getconf _NPROCESSORS_ONLN 2>/dev/null) || n=1; echo $$((2 * $${n:-1})))
.PHONY: test-short
test-short:
	$(GO) test -short -p $(SHORTP) $(FIRST) ./...

# MODULES: the modules nested in this repository (framework adapters under
# contrib/, providers whose dependencies the core must not carry, examples
# that need an SDK the core must not carry). Each
# builds alone (GOWORK=off: its replace directive points at this checkout),
# is vetted (see test-module) and runs its tests. Longest first, as in
# FIRST: MODULEJOBS run at once, and the last one started was the longest
# (provider/k8s, 28 s of go test -race alone), the run's tail.
MODULES := provider/k8s contrib/openai contrib/eino contrib/mcpgo \
	contrib/genkit contrib/anthropic examples/observe
.PHONY: modules
modules:
	@echo $(MODULES)
.PHONY: test-modules
# MODULEJOBS modules are checked at once (each one's vet for three systems,
# then its tests); their output is printed a module at a time, as each
# ends, and any failure fails the target after the others finish.
MODULEJOBS ?= 3
test-modules:
	@$(MAKE) --no-print-directory -k -j$(MODULEJOBS) -O $(addprefix test-module/,$(MODULES))

# test-module/DIR: one nested module alone (GOWORK=off), vetted, then
# tested. A module whose own files use the operating system's interfaces
# (syscall, golang.org/x/sys, os/signal, build constraints) is vetted for
# Linux, macOS and Windows; one with none of them type-checks the same on
# every system, so a plain run vets it for Linux only: its cross vets
# would compile its dependencies (an SDK of hundreds of generated files)
# twice more for nothing, minutes a module. CI's full run
# (SANDBOXTEST_FULL=1) vets every module for all three.
OSSPECIFIC := "syscall"|"golang.org/x/sys|"os/signal"|^//go:build
test-module/%:
	@echo "== module $*"
	@cd $* && export GOWORK=off && \
		if [ "$${SANDBOXTEST_FULL:-}" = 1 ] || grep -rqE --include='*.go' '$(OSSPECIFIC)' . ; then \
			$(VET3); \
		else \
			$(GO) vet ./...; \
		fi && \
		$(RACEENV) $(GO) test -race $(if $(SANDBOXKIT_TEST_HELPER),-tags $(HELPERTAGS)) -count=1 -timeout $(TESTTIMEOUT) ./...

# VET3: go vet ./... for Linux, macOS and Windows at once in the current
# directory (the three share the build cache and each type-checks for its
# own system, tests included); each one's findings are printed after all
# three end, and any finding fails it.
define VET3
logs=$$(mktemp -d) && pids= && \
	for os in linux darwin windows; do \
		GOOS=$$os $(GO) vet ./... > $$logs/$$os 2>&1 & pids="$$pids $$!"; \
	done; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; \
	for os in linux darwin windows; do \
		if [ -s $$logs/$$os ]; then echo "-- GOOS=$$os go vet ($$(pwd))"; cat $$logs/$$os; fi; \
	done; \
	rm -rf $$logs; [ $$rc = 0 ]
endef

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
