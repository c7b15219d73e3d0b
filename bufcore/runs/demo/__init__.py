"""The demo training run behind ``bufcore demo`` (README "The demo run")."""

from __future__ import annotations

from bufcore.runs.demo.loop import DemoResult, run_demo
from bufcore.runs.demo.options import DemoOptions
from bufcore.runs.demo.resume import resume_demo

__all__ = ["DemoOptions", "DemoResult", "resume_demo", "run_demo"]
