#!/bin/sh
# A Debian base image bootstrapped from the Debian mirror and imported into the local Docker
# engine: for machines that cannot pull python:3.11-slim from a registry.
#   docker/debian-base.sh [IMAGE]      (default cq-debian-base:bookworm)
# Needs root, debootstrap and a running Docker daemon.
#
# It holds what the three images of tests/containers need, so their builds run no apt-get:
# Python 3 and venv (the worker), git (the worker records pipeline commits), OpenJDK 17 (Kafka)
# and PostgreSQL 15. An image of that name built from the same suite and packages is kept (the
# label cq.base says which); else the root file system comes from the tarball cached under
# $CACHE (default ~/.cache/cq-containers, like pip's cache: keep it between CI runs), else from
# debootstrap, whose .deb files are cached there too, so a second bootstrap downloads nothing.
set -eu
IMAGE=${1:-cq-debian-base:bookworm}
DOCKER=${DOCKER:-docker}
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PACKAGES=${PACKAGES:-python3,python3-venv,ca-certificates,git,openjdk-17-jre-headless,postgresql-15}
CACHE=${CQ_CONTAINERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cq-containers}
KEY=$(printf '%s %s' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-12)
if [ "$("$DOCKER" image inspect -f '{{index .Config.Labels "cq.base"}}' "$IMAGE" 2>/dev/null)" = "$KEY" ]; then
  echo "$IMAGE is there"
  exit 0
fi
TARBALL=$CACHE/debian-$SUITE-$KEY.tar
if [ ! -s "$TARBALL" ]; then
  mkdir -p "$CACHE/debs"
  root=$(mktemp -d)
  trap 'rm -rf "$root" "$TARBALL.part"' EXIT
  debootstrap --variant=minbase --cache-dir="$CACHE/debs" --include="$PACKAGES" \
    "$SUITE" "$root" "$MIRROR"
  # debootstrap leaves the .debs it installed in the root: the cache keeps them, not the image
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -cf "$TARBALL.part" .
  mv "$TARBALL.part" "$TARBALL"
fi
"$DOCKER" import --change "LABEL cq.base=$KEY" "$TARBALL" "$IMAGE"
echo "built $IMAGE (from $TARBALL)"
