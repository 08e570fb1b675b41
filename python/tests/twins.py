"""The twins fixtures: hand-worked cases that the TypeScript and Python tests both read (test/fixtures/twins/)."""

import json
import re
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "test" / "fixtures" / "twins"


def load(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def snake(name: str) -> str:
    """A fixture's camelCase key as the Python field it names: `epsilonHigh` -> `epsilon_high`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
