"""Make the repository root importable (for `tests.reference`) when pytest runs from anywhere."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
