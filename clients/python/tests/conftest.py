from __future__ import annotations

import sys
from pathlib import Path

# The tests import the package from its source tree (test_package.py checks the built one).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
