"""`python -m tests.services up|down|status`: start, stop or probe the test services."""

from __future__ import annotations

import sys

from tests.services import ENV_FILE, down, kafka, postgres, status, up

_USAGE = "usage: python -m tests.services up|down|status"


def main(argv: list[str]) -> int:
    """Run one verb; exit status 0 on success, 1 if `status` finds a service down, 2 on misuse."""
    if len(argv) != 1:
        print(_USAGE, file=sys.stderr)
        return 2
    verb = argv[0]
    if verb == "up":
        services = up()
        print(f"kafka {services.kafka_bootstrap}")
        print(f"postgresql {services.database_url}")
        print(f"(written to {ENV_FILE})")
        return 0
    if verb == "down":
        for name, was_running in down().items():
            print(f"{name} {'stopped' if was_running else 'was not running'}")
        return 0
    if verb == "status":
        answering = status()
        addresses = {"kafka": kafka.BOOTSTRAP, "postgresql": postgres.DATABASE_URL}
        for name, ok in answering.items():
            print(f"{name} {addresses[name]} {'up' if ok else 'down'}")
        return 0 if all(answering.values()) else 1
    print(_USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
