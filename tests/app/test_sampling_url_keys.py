"""The Sampling lab's URL keys that the README lists are the ones the page binds: a listed key
that no widget binds would promise links something they do not carry."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _listed_keys() -> set[str]:
    row = next(line for line in (ROOT / "README.md").read_text().splitlines()
               if line.startswith("| Sampling lab |"))
    return set(re.findall(r"`([a-z_]+)`", row.rsplit("|", 2)[-2]))


def _bound_keys(*sources: Path) -> set[str]:
    """Keys of widget calls with ``bind="query-params"``, and names the page writes into
    ``st.query_params`` itself (string constants assigned to ``*_KEY`` names)."""
    found: set[str] = set()
    for source in sources:
        tree = ast.parse(source.read_text())
        constants = {
            target.id: node.value.value
            for node in ast.walk(tree) if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            words = {k.arg: k.value for k in node.keywords}
            bind, key = words.get("bind"), words.get("key")
            if isinstance(bind, ast.Constant) and bind.value == "query-params" and key:
                if isinstance(key, ast.Constant):
                    found.add(key.value)
                elif isinstance(key, ast.Name) and key.id in constants:
                    found.add(constants[key.id])
        text = source.read_text()
        found |= {value for name, value in constants.items()
                  if f"st.query_params[{name}]" in text}
    return found


def test_every_url_key_listed_for_the_sampling_lab_is_bound() -> None:
    bound = _bound_keys(ROOT / "pages" / "sampling_lab.py", ROOT / "app" / "ui.py")
    listed = _listed_keys()
    assert "lab_seed" in listed
    assert listed <= bound, listed - bound
