# Skiff: `make demo` and `make test` work on a fresh clone (Python 3.11 + pip is all they need).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: venv browser kubectl services sshd monitoring code-server bubblewrap demo test test-unit bench soak soak-short lint audit clean

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

demo: venv bubblewrap sshd services monitoring
	$(BIN)/python -m devstack demo $(if $(KUEUE),--kueue)

# Debian's bubblewrap (bwrap): kubesim's process nodes run pods' containers under it (kubesim/kubelet/procrt),
# and libseccomp2, which compiles their seccomp filter (procrt/seccomp.py).
bubblewrap:
	@if [ -x /usr/bin/bwrap ] && /sbin/ldconfig -p | grep -q 'libseccomp\.so\.2 '; then echo "bubblewrap, libseccomp2: installed"; \
	else $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap libseccomp2; fi

# Debian's chromium + chromedriver for tests/*/ui/ (selenium is pointed at /usr/bin/chromedriver, never downloads one),
# and a CJK font: without one, headless chromium draws the zh-CN page's characters as empty boxes (tofu).
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && [ -f /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ]; then echo "chromium, CJK font: installed"; else \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver fonts-noto-cjk; fi

# Debian's kubectl (package kubernetes-client) for tests/integration/kubesim/test_kubectl.py, unpacked into .tools/ rather than
# installed with dpkg: the package ships /usr/bin/kubectl, which dpkg refuses to overwrite when another package owns
# that path (google-cloud-sdk's kubectl dispatcher does on some machines), and a dpkg-divert would change which
# kubectl every user of the machine runs. apt-get download checks the .deb against the signed archive; the binary
# is static. The tests run exactly this one (and any other kubectl on PATH besides, e.g. a newer one).
KUBECTL_DEB := .tools/kubernetes-client
kubectl:
	@if [ -x $(KUBECTL_DEB)/usr/bin/kubectl ]; then echo "kubectl (Debian kubernetes-client): installed"; else \
	  if ! apt-cache show kubernetes-client >/dev/null 2>&1; then $(SUDO) apt-get update -qq; fi && \
	  rm -rf .tools/deb && mkdir -p .tools/deb && cd .tools/deb && apt-get download -q kubernetes-client && \
	  dpkg-deb -x kubernetes-client_*.deb ../kubernetes-client && cd .. && rm -rf deb && \
	  ./kubernetes-client/usr/bin/kubectl version --client; fi

# Debian's PostgreSQL and Redis for the production-profile tests (devstack/services.py starts private instances
# on free ports when no local server answers; the binaries must be there).
services:
	@if [ -x /usr/bin/redis-server ] && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then echo "postgresql, redis-server: installed"; else \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server; fi

# Debian's sshd (and chpasswd) for the development-instance start-up script test (tests/*/devinstances/); sshpass
# for the test that logs in to a running instance with its password over ssh (`sshpass -e`: from the environment).
sshd:
	@if [ -x /usr/sbin/sshd ] && [ -x /usr/bin/sshpass ]; then echo "sshd, sshpass: installed"; else \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server sshpass; fi

# Debian's prometheus + promtool for tests/*/metrics/ (alert rules checked and unit-tested, a real Prometheus scraping
# Skiff's endpoint); the package's service is not used: the tests start their own on loopback.
monitoring:
	@if [ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ]; then echo "prometheus, promtool: installed"; else \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus; fi

# Optional: code-server from npm (needs Node.js 20 and GitHub reachable for its post-install), so that the
# start-up script test also logs in to code-server; without it only that test is skipped, saying so.
code-server:
	mkdir -p .tools/code-server && cd .tools/code-server && \
	  npm_config_unsafe_perm=true npm install --no-audit --no-fund code-server@4.96.4

# A PostgreSQL / Redis already answering on 127.0.0.1 (the project's machines run both) is used through
# SKIFF_TEST_PG_URL / SKIFF_TEST_REDIS_URL, with a fresh database / db number per session; else private ones.
# The short soak (tests/e2e/devstack/test_soak_e2e.py, marker soak; also alone as `make soak-short`) is part of it:
# 4 to 5 minutes of the 2-core machine (docs/development.md, `make soak`).
# Two pytest runs: the tests that start no Airflow in parallel (as make test-unit), then the stack tests one at a
# time (fixed ports, and two Airflows on two cores slow each other); it fails when either fails.
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider
XDIST := -n 4 --dist loadfile
test: venv browser kubectl sshd services monitoring bubblewrap
	eval "$$($(BIN)/python -m devstack.services detect)" && \
	  { $(PYTEST) -m "not stack" $(XDIST); unit=$$?; $(PYTEST) -m stack; stack=$$?; \
	    echo "make test: not stack -> exit $$unit, stack -> exit $$stack"; [ $$unit = 0 ] && [ $$stack = 0 ]; }

# The fast loop: every test that starts no Airflow (no stack, api-server or demo: marker `stack`, set by
# tests/conftest.py on e2e tests and tests using a stack fixture), with pytest-xdist: four workers on the two cores
# (the tests mostly wait on processes and clusters: two workers kept 64 % of one core busy), a test file's tests in
# one worker (--dist loadfile: a module-scoped fixture is built once). Measured in docs/development.md.
test-unit: venv kubectl sshd services monitoring bubblewrap
	eval "$$($(BIN)/python -m devstack.services detect)" && $(PYTEST) -m "not stack" $(XDIST)

soak-short: venv services
	eval "$$($(BIN)/python -m devstack.services detect)" && $(BIN)/python -m pytest -q -p no:cacheprovider -m soak

bench: venv
	$(BIN)/python -m benchmarks

# Skiff under sustained faults, then an audit of its invariants (devstack/soak.py); SOAK_MINUTES / SOAK_SEED.
# Writes .artifacts/soak.md; `python -m benchmarks soak --write` copies it into BENCHMARKS.md.
SOAK_MINUTES ?= 10
SOAK_SEED ?= 1
soak: venv services
	eval "$$($(BIN)/python -m devstack.services detect)" && \
	  $(BIN)/python -m devstack.soak --minutes $(SOAK_MINUTES) --seed $(SOAK_SEED)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-logo

# pip-audit over requirements.txt (needs PyPI's JSON API and api.osv.dev; not in `make test`). Exit 2 and
# "incomplete" when any package could not be audited: never "no known vulnerabilities" for what was not looked up.
audit: venv
	$(BIN)/python tools/audit.py

clean:
	rm -rf .airflow .demo .pytest_cache
