#!/bin/sh
# Make sure a Docker daemon answers: start Debian's dockerd (as root) when none does, and wait
# for it. Its log is $DOCKERD_LOG (default /var/log/cq-dockerd.log).
#   docker/dockerd.sh
set -eu
DOCKER=${DOCKER:-docker}
LOG=${DOCKERD_LOG:-/var/log/cq-dockerd.log}
if "$DOCKER" info >/dev/null 2>&1; then
  exit 0
fi
command -v dockerd >/dev/null || PATH=$PATH:/usr/sbin
echo "starting dockerd (log: $LOG)"
nohup dockerd >>"$LOG" 2>&1 </dev/null &
i=0
until "$DOCKER" info >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -gt 60 ]; then
    echo "dockerd did not answer within 60 s:" >&2
    tail -n 30 "$LOG" >&2
    exit 1
  fi
  sleep 1
done
