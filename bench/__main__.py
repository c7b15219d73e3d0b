"""``python -m bench``: run the benchmark and print the table."""

from __future__ import annotations

from bench.cli import main

raise SystemExit(main())
