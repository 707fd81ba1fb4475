"""The layers of ``brain/`` import only downward (spec/00-overview.md, "Layers").

:data:`LAYERS` is the order, top to bottom, and the same as the table of
spec/00-overview.md (a test compares them, so the spec and the check cannot
drift apart). A module may import modules of its
own layer and of the layers below it, never one above: every ``import`` and
``from ... import`` counts, also one made only for the type checker or inside
a function, since each ties the module to what it names. Every module of
``brain/`` belongs to exactly one layer, so a new module must be given its
place here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Final

import brain

PACKAGE: Final = Path(brain.__file__).resolve().parent
OVERVIEW: Final = PACKAGE.parent / "spec" / "00-overview.md"

LAYERS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("cli", ("brain.cli", "brain.__main__")),
    ("mcp", ("brain.mcp",)),
    ("server", ("brain.server",)),
    ("sdk", ("brain.__init__", "brain.sdk")),
    ("client", ("brain.client",)),
    (
        "engine",
        (
            "brain.engine.__init__",
            "brain.engine.database",
            "brain.engine.dispatch",
            "brain.engine.dispatcher",
            "brain.engine.planner",
        ),
    ),
    ("admin", ("brain.engine.admin",)),
    ("recall", ("brain.engine.recall",)),
    ("index", ("brain.engine.index",)),
    ("records", ("brain.engine.records",)),
    ("write", ("brain.engine.write",)),
    ("extract", ("brain.engine.extract",)),
    ("replication", ("brain.engine.replication",)),
    ("wal", ("brain.engine.wal",)),
    ("store", ("brain.engine.store",)),
    ("embed", ("brain.embed",)),
    ("wire", ("brain.wire",)),
    (
        "ground",
        (
            "brain.cbor",
            "brain.cbor_fast",
            "brain.cbor_reference",
            "brain.errors",
            "brain.ids",
            "brain.version",
        ),
    ),
)
"""Each layer's name and the modules it holds (an entry holds itself and, for a
package, everything under it; a package's own ``__init__`` is named as such).
``brain.__main__`` runs the command line, so it stands with it."""


def module_name(path: Path, root: Path = PACKAGE) -> str:
    """The dotted name of the module in ``path`` (a package's ``__init__`` kept)."""
    relative = path.relative_to(root.parent).with_suffix("")
    return ".".join(relative.parts)


def _file_module(dotted: str, root: Path) -> str | None:
    """The module (file) the dotted name ``dotted`` is, if it is one."""
    base = root.parent.joinpath(*dotted.split("."))
    if base.with_suffix(".py").is_file():
        return dotted
    if (base / "__init__.py").is_file():
        return f"{dotted}.__init__"
    return None


def _target(dotted: str, root: Path) -> str | None:
    """The module an import of ``dotted`` runs: the module itself, or for a name
    inside one (a class, a function), the module that defines it."""
    parts = dotted.split(".")
    while parts:
        found = _file_module(".".join(parts), root)
        if found is not None:
            return found
        parts.pop()
    return None


def imports(path: Path, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """Every module of ``brain`` the file imports, with the line of the import."""
    package = module_name(path, root).rsplit(".", 1)[0]  # a package's __init__ too
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            line, names = node.lineno, [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            line, names = node.lineno, [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == root.name or name.startswith(root.name + "."):
                target = _target(name, root)
                if target is not None and (line, target) not in found:
                    found.append((line, target))
    return sorted(found)


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of the layer holding ``module`` (0 is the top)."""
    for index, (_, entries) in enumerate(LAYERS):
        if any(module == entry or module.startswith(entry + ".") for entry in entries):
            return index
    return None


def violations(root: Path = PACKAGE) -> list[str]:
    """Each module no layer holds, and each import of a module from a higher layer."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root.parent)
        own = layer_of(module_name(path, root))
        if own is None:
            found.append(f"{where}: no layer holds {module_name(path, root)}")
            continue
        for line, target in imports(path, root):
            other = layer_of(target)
            if other is None:
                found.append(f"{where}:{line}: imports {target}, which no layer holds")
            elif other < own:
                found.append(
                    f"{where}:{line}: the {LAYERS[own][0]} layer imports {target} "
                    f"of the {LAYERS[other][0]} layer, above it"
                )
    return found


def test_every_module_imports_only_its_own_layer_and_those_below() -> None:
    assert len(list(PACKAGE.rglob("*.py"))) > 50  # the walk sees the package
    problems = violations()
    assert not problems, "imports against the layer order:\n" + "\n".join(problems)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A copy of the package's layout in ``tmp_path`` holding ``files``."""
    root = tmp_path / "brain"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_an_upward_import_is_named_with_its_line_and_both_layers(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "cbor.py": '"""x"""\n\nimport brain.server\n',
            "server/__init__.py": "",
        },
    )
    assert violations(root) == [
        "brain/cbor.py:3: the ground layer imports brain.server.__init__ of the server "
        "layer, above it"
    ]


def test_imports_for_the_type_checker_in_functions_and_relative_ones_count(
    tmp_path: Path,
) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "engine/__init__.py": "",
            "engine/index/__init__.py": "",
            "engine/index/service.py": "class Retrieval: ...\n",
            "engine/write/__init__.py": "",
            "engine/write/reads.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from brain.engine.index.service import Retrieval\n"
                "def later() -> None:\n"
                "    from brain.engine import index\n"
                "from ..index import service\n"
            ),
        },
    )
    assert [problem.split(": ", 1)[0] for problem in violations(root)] == [
        "brain/engine/write/reads.py:3",
        "brain/engine/write/reads.py:5",
        "brain/engine/write/reads.py:6",
    ]


def test_a_module_no_layer_holds_is_named(tmp_path: Path) -> None:
    root = _package(tmp_path, {"__init__.py": "", "engine/__init__.py": "", "engine/new.py": ""})
    assert violations(root) == ["brain/engine/new.py: no layer holds brain.engine.new"]


def spec_layers(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """The layer table of spec/00-overview.md's "Layers" section: each row's layer
    name and its modules, as dotted names (``brain/cli/`` is ``brain.cli``,
    ``brain/cbor.py`` is ``brain.cbor``)."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows: list[tuple[str, tuple[str, ...]]] = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("layer", "") or set(cells[0]) <= {"-"}:
            continue
        paths = re.findall(r"`(brain/[^`]*)`", cells[1])
        modules = tuple(path.rstrip("/").removesuffix(".py").replace("/", ".") for path in paths)
        rows.append((cells[0], modules))
    return rows


def test_the_layer_order_is_the_one_the_overview_draws() -> None:
    assert spec_layers(OVERVIEW.read_text(encoding="utf-8")) == [
        (name, entries) for name, entries in LAYERS
    ]


def test_the_readme_tour_names_every_package() -> None:
    """Every package of ``brain/`` and of ``brain/engine/`` has its row in the tour."""
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    tour = readme.split("## Tour of the repository", 1)[1].split("\n## ", 1)[0]
    packages = [
        f"brain/{'/'.join(parts[:-1])}/"
        for parts in (path.relative_to(PACKAGE).parts for path in PACKAGE.rglob("__init__.py"))
        if len(parts) == 2 or (len(parts) == 3 and parts[0] == "engine")
    ]
    assert "brain/engine/records/" in packages
    missing = [package for package in sorted(packages) if f"`{package}`" not in tour]
    assert not missing, f"README.md's tour does not name {missing}"
