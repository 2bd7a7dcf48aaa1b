"""Move the test pins (tests/constraints.txt) to the newest releases the package index serves today.

    python .ci/move_pins.py            # from the checkout, with any Python >= 3.10

In a fresh venv it installs ``torch==2.13.0`` (the CPU wheel the test machines carry; TORCH=... to change it) and
``.[dev,llamacpp]`` (the README's test extras) without the pins, so pip takes the newest release each range in
pyproject.toml admits; runs the whole suite (``--tier all``) against them; lists every pin that moved (old -> new); and, when the suite passed, writes
them to tests/constraints.txt. Exit: the suite's exit code. A failure here is what the next release would do to the
pinned suite: follow the new behaviour in kvplan (say which version a rule follows) and run this again.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / "tests" / "constraints.txt"
HEADER = """\
# The oracles the tests compare against, pinned: the README's test command installs with `-c tests/constraints.txt`,
# so a release elsewhere cannot turn CI red. Users install kvplan with the ranges in pyproject.toml.
# Move the pins to the newest releases (re-runs the whole suite, lists what changed): python .ci/move_pins.py
# Python 3.11, {date}.
"""


def read_pins(text: str) -> dict[str, str]:
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[canonical(name)] = version.strip()
    return pins


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().strip()


def freeze(python: Path) -> dict[str, str]:
    out = subprocess.run([str(python), "-m", "pip", "freeze", "--exclude", "kvplan"], check=True,
                         capture_output=True, text=True).stdout
    return {name: version.split("+", 1)[0] for name, version in read_pins(out).items()}  # torch 2.13.0+cpu


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="kvplan-pins-") as tmp:
        env_dir = Path(tmp) / "venv"
        venv.create(env_dir, with_pip=True)
        python = env_dir / "bin" / "python"
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True)
        subprocess.run([*pip, f"torch=={os.environ.get('TORCH', '2.13.0')}", f"{ROOT}[dev,llamacpp]"], check=True)
        new = freeze(python)
        old = read_pins(PINS.read_text(encoding="utf-8")) if PINS.exists() else {}
        for name in sorted(old.keys() | new.keys()):
            if old.get(name) != new.get(name):
                print(f"{name}: {old.get(name, '(none)')} -> {new.get(name, '(gone)')}")
        suite = subprocess.run([str(python), "-m", "pytest", "--tier", "all", "-p", "no:cacheprovider"], cwd=ROOT)
        if suite.returncode != 0:
            print(f"the suite failed against the newest releases: {PINS.name} left as it is", file=sys.stderr)
            return suite.returncode
        from datetime import date

        lines = [f"{name}=={version}" for name, version in sorted(new.items())]
        PINS.write_text(HEADER.format(date=date.today().isoformat()) + "\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {PINS.relative_to(ROOT)} ({len(lines)} pins)")
        return 0


if __name__ == "__main__":
    sys.exit(main())
