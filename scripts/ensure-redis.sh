#!/usr/bin/env bash
# Makes sure redis-server and redis-cli exist for the Redis tests, installing Debian's packages when we can.
# The tests start their own servers on free loopback ports; nothing here starts a service.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "redis-server not found: installing redis-server and redis-tools with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
else
  echo "redis-server not found. Install it (Debian/Ubuntu: sudo apt-get install redis-server redis-tools;" >&2
  echo "macOS: brew install redis); the Redis tests will fail without it." >&2
fi
