#!/bin/sh
# A Debian base image with Python 3 and venv, bootstrapped from the Debian mirror and imported
# into the local Docker engine: for machines that cannot pull python:3.11-slim from a registry.
#   docker/debian-base.sh [IMAGE]      (default cq-debian-base:bookworm; kept if present)
# Needs root, debootstrap and a running Docker daemon.
set -eu
IMAGE=${1:-cq-debian-base:bookworm}
DOCKER=${DOCKER:-docker}
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
if "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "$IMAGE is there"
  exit 0
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  "$SUITE" "$root" "$MIRROR"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | "$DOCKER" import - "$IMAGE"
echo "built $IMAGE"
