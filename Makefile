# Ferrodis: build, test, benchmark and run. `make test` is what CI runs (.ci/run).

CARGO   ?= cargo
BIN     := target/release/ferrodis-server
PREFIX  ?= /usr/local
CONF    ?= redis.conf
# Root when not already root (containers usually are); empty otherwise.
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
FUZZ_SECONDS ?= 60

.PHONY: build test deps bench bench-tls install run fmt clippy fuzz fuzz-seed conformance conformance-external suite-slice

build:
	$(CARGO) build --release

# The differential tests compare against the real redis-server (Debian's redis 7.0),
# tests/sentinel.rs runs Debian's redis-sentinel over ferrodis and tests/tls.rs makes its
# certificates with openssl; Redis's suite over TLS (tools/redis-suite.sh --tls) needs tcl-tls;
# tests/aof.rs counts fsyncs with strace;
# install them when missing. They run against an optimized build (profile ci: release without
# fat LTO, quick to link); --no-fail-fast so one failing suite does not hide the others.
deps:
	@(command -v redis-server && command -v redis-check-rdb && command -v redis-benchmark && command -v redis-sentinel && command -v python3 && command -v tclsh && command -v openssl && command -v strace && echo 'exit [catch {package require tls}]' | tclsh) >/dev/null 2>&1 || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y redis-server redis-tools redis-sentinel python3 tcl tcl-tls openssl strace)

# Redis 7.0.15's own test suite (../shared/redis-tests, see tests/redis-suite/README.md). CI runs
# the slice below (units that finish in seconds each); `make conformance` runs every unit of
# tests/redis-suite/units.txt against the release build, and CONFORMANCE_FLAGS=--redis gives the
# baseline.
SUITE_SLICE ?= unit/printver unit/protocol unit/keyspace unit/scan unit/info-command unit/type/incr \
	unit/type/string unit/type/hash unit/type/list unit/type/zset unit/type/stream unit/sort unit/quit \
	unit/bitops unit/bitfield unit/pubsub unit/pubsubshard unit/pause unit/slowlog unit/dump unit/auth \
	unit/acl unit/acl-v2 unit/introspection-2 unit/limits unit/violations integration/redis-cli \
	integration/redis-benchmark integration/logging integration/convert-zipmap-hash-on-load \
	integration/convert-ziplist-hash-on-load integration/convert-ziplist-zset-on-load \
	unit/wait integration/replication-3 integration/replication-4 integration/block-repl \
	integration/psync2-reg integration/psync2-pingoff integration/psync2-master-restart \
	integration/failover integration/shutdown unit/shutdown unit/pendingquerybuf \
	unit/cluster unit/cluster-scripting unit/cluster/misc unit/cluster/links
CONFORMANCE_FLAGS ?= --server $(BIN)

test: deps
	$(CARGO) test --profile ci --no-fail-fast
	$(MAKE) suite-slice

suite-slice:
	$(CARGO) build --profile ci --bin ferrodis-server
	tools/redis-suite.sh --server target/ci/ferrodis-server --jobs 2 $(SUITE_SLICE)

conformance: deps build
	tools/redis-suite.sh $(CONFORMANCE_FLAGS) --jobs 2

# The same units in external mode, unit after unit on one running server.
conformance-external: deps build
	tools/redis-suite-external.sh $(CONFORMANCE_FLAGS)

bench: build
	@if [ -f ../shared/bench/compare.py ]; then \
		python3 ../shared/bench/compare.py --server $(BIN) --rounds 5; \
	else \
		echo "../shared/bench/compare.py not found; running the criterion micro-benchmarks instead"; \
		$(CARGO) bench --bench hot_paths; \
	fi

# redis-benchmark --tls side by side with real Redis (SET/GET at -P 1 and -P 16, handshake rate).
bench-tls: deps build
	python3 tools/tls_bench.py --server $(BIN) --rounds 5 --pin

install: build
	$(SUDO) install -D -m 0755 $(BIN) $(PREFIX)/bin/ferrodis-server

run: build
	@if [ -f $(CONF) ]; then ./$(BIN) $(CONF); else echo "no $(CONF): running with defaults"; ./$(BIN); fi

fmt:
	$(CARGO) fmt --all

clippy:
	$(CARGO) clippy --all-targets -- -D warnings

# Needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz). The stable-toolchain version of
# the same property runs in `make test` (tests/parser_fuzz.rs). FUZZ_TARGETS picks the targets; the
# RDB ones are seeded from the fixture library (RDB_FIXTURES) the first time: whole files for
# rdb_file, and for restore_payload the fixtures' DUMP payloads when a redis-server is at hand
# (fuzz/seed_payloads.py); cluster_msg gets well-formed bus frames (fuzz/seed_cluster_msgs.py); commands
# gets the differential scripts' command lines (fuzz/seed_commands.py); config_file gets our redis.conf and
# the suite's. Corpora and artifacts stay out of git (.gitignore).
FUZZ_TARGETS ?= resp_parser rdb_file restore_payload aof_file cluster_msg commands config_file
RDB_FIXTURES ?= ../shared/rdb
REDIS_TESTS ?= ../shared/redis-tests

fuzz-seed:
	@mkdir -p $(addprefix fuzz/corpus/,$(FUZZ_TARGETS)) fuzz/corpus/rdb_file fuzz/corpus/restore_payload fuzz/corpus/cluster_msg fuzz/corpus/commands fuzz/corpus/config_file
	@if [ -z "$$(ls -A fuzz/corpus/cluster_msg)" ]; then python3 fuzz/seed_cluster_msgs.py fuzz/corpus/cluster_msg; fi
	@if [ -z "$$(ls -A fuzz/corpus/commands)" ]; then python3 fuzz/seed_commands.py tests/differential fuzz/corpus/commands; fi
	@if [ -z "$$(ls -A fuzz/corpus/config_file)" ]; then \
		cp redis.conf fuzz/corpus/config_file/; \
		cp $(REDIS_TESTS)/7.0.15/tests/assets/*.conf fuzz/corpus/config_file/ 2>/dev/null || true; \
	fi
	@if [ -d $(RDB_FIXTURES) ] && [ -z "$$(ls -A fuzz/corpus/rdb_file)" ]; then \
		cp $(RDB_FIXTURES)/*.rdb $(RDB_FIXTURES)/assets/*.rdb fuzz/corpus/rdb_file/; \
		rm -f fuzz/corpus/rdb_file/*-big.rdb; \
	fi
	@if [ -z "$$(ls -A fuzz/corpus/restore_payload)" ] && command -v redis-server >/dev/null; then \
		python3 fuzz/seed_payloads.py $(RDB_FIXTURES)/redis-7.0.15-full.rdb fuzz/corpus/restore_payload; \
	fi

fuzz: fuzz-seed
	cd fuzz && for t in $(FUZZ_TARGETS); do \
		$(CARGO) +nightly fuzz run $$t corpus/$$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 -max_len=65536 || exit 1; \
	done
