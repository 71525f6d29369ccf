"""The quickstart, the main job and an example pipeline, unchanged, with their log directory on an object store.

Starts a real S3-compatible server on loopback (moto's standalone server, from the dev extras: ``make setup``
installs it), points the standard ``AWS_*`` variables at it, and runs each program as a user would, with
``--log-dir s3://<bucket>/<program>``:

1. ``python -m examples.quickstart``: create a topic, produce, stream it with Spark to the console;
2. ``python -m examples.demo``: the main job (a producer, two streaming queries, exactly-once into a topic and
   a Delta table), shortened with ``--seconds``;
3. ``python -m examples.log_to_delta``: a topic into Delta bronze and silver tables.

Against a real bucket, set ``AWS_*`` (or use an instance role) and pass your own URL to any of them instead.
Each partition is read through a local replica below ``$PYSPARKLOG_CACHE_DIR`` (here ``data/object-store-cache``).

Run it from the checkout (``make run-s3``)::

    .venv/bin/python -m examples.on_object_store [--seconds 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from tests.s3_server import s3_server

BUCKET = "pysparklog-examples"
CHECKOUT = Path(__file__).resolve().parents[1]


def programs(seconds: float) -> list[list[str]]:
    """Each program's command line, its log directory on the bucket."""
    return [
        ["examples.quickstart", "--log-dir", f"s3://{BUCKET}/quickstart"],
        ["examples.demo", "--log-dir", f"s3://{BUCKET}/demo", "--seconds", str(seconds)],
        ["examples.log_to_delta", "--log-dir", f"s3://{BUCKET}/log_to_delta"],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.on_object_store",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the main job produces (default: 20)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARKLOG_CACHE_DIR", str(CHECKOUT / "data" / "object-store-cache"))
    with s3_server(BUCKET) as endpoint:
        print(f"S3-compatible server (moto) on {endpoint}, bucket {BUCKET}", flush=True)
        for program in programs(args.seconds):
            print(f"\n$ python -m {' '.join(program)}", flush=True)
            status = subprocess.run([sys.executable, "-m", *program], cwd=CHECKOUT, check=False).returncode
            if status != 0:
                print(f"python -m {program[0]} failed with status {status}", file=sys.stderr)
                return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
