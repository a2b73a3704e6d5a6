"""How long the console script takes to print its help: what a user waits for before anything.

    python3 bench/cli_start.py [--runs 10] [--src CHECKOUT]

Runs ``rag-router --help`` and ``rag-router query --help`` RUNS times each in fresh processes
and prints one JSON line per command with the median and the fastest run in seconds (the
fastest is the machine's floor; the median says how a busy machine feels). ``--src`` puts another
checkout first on the import path, so one venv measures before and after a change
(``git worktree add /tmp/before HEAD~1`` then ``--src /tmp/before``). Run it on an idle
machine: every other process's CPU time is in these numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (["--help"], ["query", "--help"])


def script() -> list[str]:
    """The installed console script beside this interpreter, else the module."""
    installed = Path(sys.executable).parent / "rag-router"
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "rag_router.cli"]


def once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--src", type=Path, help="a checkout to import rag_router from instead")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(args.src.resolve()), env.get("PYTHONPATH")]))
    once([*script(), "--help"], env)  # warm the file cache and the bytecode
    for command in COMMANDS:
        seconds = [once([*script(), *command], env) for _ in range(args.runs)]
        print(
            json.dumps(
                {
                    "command": "rag-router " + " ".join(command),
                    "runs": args.runs,
                    "p50_s": round(statistics.median(seconds), 3),
                    "min_s": round(min(seconds), 3),
                    "load_1m": round(os.getloadavg()[0], 1),
                }
            )
        )


if __name__ == "__main__":
    main()
