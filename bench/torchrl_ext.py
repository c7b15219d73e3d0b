"""torchrl's C++ segment trees for the bench, built from torchrl's own sources when its wheel's
prebuilt extension does not load.

torchrl's prioritized samplers (``PrioritizedSampler``, ``PrioritizedSliceSampler``,
``PrioritizedReplayBuffer``) run on sum and min trees written in C++ (``torchrl._torchrl``). The
wheel's prebuilt extension is linked against the torch it was built with: torchrl 0.14.1's fails
to load with torch 2.13 (``undefined symbol: torch::autograd::_wrap_outputs...``), and torchrl
then has no prioritized sampler at all. The wheel ships the C++ sources (``torchrl/csrc``), so
``python -m bench.torchrl_ext`` compiles ``pybind.cpp`` and ``utils.cpp`` (the CPU trees; the
CUDA file is left out) against the installed torch with ``torch.utils.cpp_extension``, into
``build/torchrl_ext/torchrl-<version>_torch-<version>/_torchrl.so`` (about two minutes on two
cores; it needs a C++ compiler, the Python headers and ninja, which the bench extra installs).
Nothing is written into the installed torchrl package.

:func:`activate` (called by every bench child that uses torchrl, before torchrl's samplers are
imported) makes ``import torchrl._torchrl`` find a working extension: the wheel's own when it
loads, else the one built here. The code compiled is torchrl's, unchanged, so the peer measured
is torchrl as its authors wrote it, built for this torch. bufcore itself never needs a compiled
extension.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
MODULE = "torchrl._torchrl"
SOURCES = ("pybind.cpp", "utils.cpp")
"""The CPU trees (``segment_tree.h``) and the module's other functions; no CUDA."""
BUILD_HINT = "build it from torchrl's sources with: python -m bench.torchrl_ext"
_active: str | None = None  # what activate() found, once it found one


class ExtensionMissing(RuntimeError):
    """Neither the wheel's extension nor one built here loads."""


def torchrl_dir() -> Path:
    """The installed torchrl package's directory (found without importing torchrl).

    Raises:
        ExtensionMissing: torchrl is not installed.
    """
    spec = importlib.util.find_spec("torchrl")
    if spec is None or not spec.submodule_search_locations:
        raise ExtensionMissing("torchrl is not installed (pip install -e '.[bench]')")
    return Path(next(iter(spec.submodule_search_locations)))


def build_dir() -> Path:
    """Where the extension for the installed torchrl and torch is built."""
    torchrl = importlib.metadata.version("torchrl")
    torch = importlib.metadata.version("torch")
    return ROOT / "build" / "torchrl_ext" / f"torchrl-{torchrl}_torch-{torch}"


def built_path() -> Path:
    """The extension :func:`build` writes (it may not exist yet)."""
    return build_dir() / "_torchrl.so"


def _load(path: Path) -> ModuleType:
    """Load the extension at ``path`` as ``torchrl._torchrl`` (torch imported first: the
    extension links against its libraries).

    Raises:
        ImportError: it does not load (an undefined symbol, say).
    """
    import torch  # noqa: F401

    spec = importlib.util.spec_from_file_location(MODULE, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a loadable extension")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "SumSegmentTreeFp32"):
        raise ImportError(f"{path}: has no SumSegmentTreeFp32")
    return module


def _prebuilt() -> Path | None:
    """The extension the torchrl wheel installed, if any."""
    found = sorted(torchrl_dir().glob("_torchrl*.so"))
    return found[0] if found else None


def activate() -> str:
    """Make ``import torchrl._torchrl`` give working trees; say which extension it is.

    Call it before anything imports ``torchrl.data`` (torchrl looks for its trees once, when its
    sampler module is imported).

    Returns:
        ``"prebuilt"`` (the wheel's own extension loads) or ``"built here against torch X"``.

    Raises:
        ExtensionMissing: torchrl is not installed, its samplers were imported already without
            trees, or neither the wheel's extension nor a built one loads (says how to build).
    """
    import torch

    global _active
    if _active is not None:
        return _active
    imported = sys.modules.get("torchrl.data.replay_buffers.samplers.prioritized")
    if imported is not None and getattr(imported, "SumSegmentTreeFp32", None) is None:
        raise ExtensionMissing("torchrl's samplers were imported before activate(), without trees")
    reason = "the torchrl wheel has no extension"
    prebuilt = _prebuilt()
    if prebuilt is not None:
        try:
            sys.modules[MODULE] = _load(prebuilt)
            _active = "prebuilt"
            return _active
        except ImportError as err:
            reason = f"its prebuilt extension does not load ({str(err).splitlines()[0][:160]})"
    built = built_path()
    if not built.exists():
        raise ExtensionMissing(f"torchrl's C++ trees are unavailable: {reason}; {BUILD_HINT}")
    try:
        sys.modules[MODULE] = _load(built)
    except ImportError as err:
        raise ExtensionMissing(
            f"the extension built in {built.parent} does not load ({err}); rebuild: "
            "python -m bench.torchrl_ext --force"
        ) from err
    _active = f"built here against torch {torch.__version__}"
    return _active


def unavailable() -> str | None:
    """Why torchrl's prioritized samplers cannot run here, or None when they can (loads the
    extension into this process, as :func:`activate` does)."""
    try:
        activate()
    except ExtensionMissing as err:
        return str(err)
    return None


def build(*, verbose: bool = False) -> Path:
    """Compile torchrl's shipped C++ sources against the installed torch; the extension's path.

    Raises:
        ExtensionMissing: torchrl is not installed or ships no sources.
        RuntimeError: the compiler failed (``torch.utils.cpp_extension`` says why).
    """
    sources = [torchrl_dir() / "csrc" / name for name in SOURCES]
    missing = [str(path) for path in sources if not path.exists()]
    if missing:
        raise ExtensionMissing(f"torchrl ships no C++ sources here: {', '.join(missing)}")
    from torch.utils import cpp_extension

    target = build_dir()
    target.mkdir(parents=True, exist_ok=True)
    # ninja from the bench extra lives beside this interpreter, maybe not on PATH.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    cpp_extension.load(
        name="_torchrl",
        sources=[str(path) for path in sources],
        extra_cflags=["-O3", "-DNDEBUG"],  # a release build, as a wheel's (no asserts)
        build_directory=str(target),
        verbose=verbose,
        is_python_module=True,
    )
    return built_path()


def main(argv: Sequence[str] | None = None) -> int:
    """Build the extension unless a working one exists; exit status 0 when torchrl's trees load
    afterwards (or torchrl is not installed: nothing to do), 1 when the build fails or its
    result does not load (the bench then skips torchrl's prioritized rows, saying why)."""
    parser = argparse.ArgumentParser(prog="python -m bench.torchrl_ext", description=__doc__)
    parser.add_argument("--force", action="store_true", help="rebuild even if one loads")
    parser.add_argument("--verbose", action="store_true", help="show the compiler's output")
    args = parser.parse_args(argv)
    try:
        torchrl_dir()
    except ExtensionMissing as err:
        print(f"torchrl_ext: {err}; nothing to build")
        return 0
    prebuilt = _prebuilt()
    if prebuilt is not None and not args.force:
        try:
            _load(prebuilt)
        except ImportError as err:
            print(f"torchrl_ext: the wheel's extension does not load ({str(err)[:160]})")
        else:
            print("torchrl_ext: the wheel's prebuilt extension loads; nothing to build")
            return 0
    if built_path().exists() and not args.force:
        print(f"torchrl_ext: already built: {built_path()}")
    else:
        print(f"torchrl_ext: compiling torchrl's C++ trees into {build_dir()} (a few minutes)")
        try:
            build(verbose=args.verbose)
        except (ExtensionMissing, RuntimeError, OSError) as err:
            # No compiler, no Python headers, no ninja: the bench skips torchrl's PER rows.
            print(f"torchrl_ext: the build failed: {str(err)[-2000:]}")
            return 1
    # Checked in a fresh interpreter, as a bench child loads it (the build imported it here).
    check = (
        "from bench.torchrl_ext import activate; print(activate()); "
        "from torchrl.data.replay_buffers.samplers import PrioritizedSampler; "
        "PrioritizedSampler(8, 0.6, 0.4)"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode:
        print(f"torchrl_ext: the built extension does not work:\n{done.stderr[-2000:]}")
        return 1
    print(f"torchrl_ext: ok, torchrl's PrioritizedSampler runs on {built_path()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
