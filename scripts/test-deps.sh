#!/usr/bin/env bash
# What the test suite needs beyond the Python packages: cmake and a C++ compiler (to build the
# local llama-server), a real Prometheus (the Prometheus telemetry test) and a real Pushgateway
# (the `qualify export` push test), podman with runc (the container test: crun refuses hybrid
# cgroups). Installed from Debian's packages when missing and this user
# may install them; otherwise each missing one is named, and the tests that need Prometheus or
# the Pushgateway skip saying so.
set -uo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
command -v prometheus >/dev/null || test -x /usr/bin/prometheus || need+=(prometheus)
command -v prometheus-pushgateway >/dev/null || test -x /usr/bin/prometheus-pushgateway \
  || need+=(prometheus-pushgateway)
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || test -x /usr/sbin/runc || need+=(runc)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "test-deps: installing ${need[*]} (Debian packages)" >&2
  apt-get update -q >/dev/null && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null \
    || echo "test-deps: could not install ${need[*]}; the tests that need them will say so" >&2
else
  echo "test-deps: missing ${need[*]} and not root with apt-get: install them to run every test" >&2
fi
exit 0
