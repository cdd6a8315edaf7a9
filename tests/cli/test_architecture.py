"""The import rule of docs/architecture.md, read from the code itself.

Every module belongs to one layer; a module may import only from its own
layer or the layers below it, and no two modules may import each other,
directly or through others (imports inside functions count too: a cycle
hidden in a function is still a cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "dsh_mnemo"

# Lowest first; a module pattern ending in ".*" covers a whole package.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("dsh_mnemo", "dsh_mnemo.errors", "dsh_mnemo.paths", "dsh_mnemo.fsutil",
              "dsh_mnemo.config", "dsh_mnemo.faults", "dsh_mnemo.report", "dsh_mnemo.threads",
              "dsh_mnemo.lazy_re", "dsh_mnemo.record",
              "dsh_mnemo.server", "dsh_mnemo.server.client", "dsh_mnemo.memory.scrub",
              "dsh_mnemo.memory.upstream_import")),
    ("embeddings", ("dsh_mnemo.embed.*",)),
    ("bank files", ("dsh_mnemo.memory", "dsh_mnemo.memory.banks")),
    ("harness facts", ("dsh_mnemo.harnesses", "dsh_mnemo.harnesses.registry")),
    ("workspace", ("dsh_mnemo.workspace.*",)),
    ("memory", ("dsh_mnemo.memory.*",)),
    ("harness installer", ("dsh_mnemo.harnesses.*",)),
    ("mcp client config", ("dsh_mnemo.mcp", "dsh_mnemo.mcp.clients")),
    ("hook runtime", ("dsh_mnemo.hook.*",)),
    ("resident server", ("dsh_mnemo.server.*",)),
    ("migration", ("dsh_mnemo.migrate.*",)),
    ("importers", ("dsh_mnemo.importers.*",)),
    ("doctor", ("dsh_mnemo.doctor",)),
    ("commands", ("dsh_mnemo.commands.*",)),
    ("mcp server", ("dsh_mnemo.mcp.*",)),
    ("cli", ("dsh_mnemo.cli.*", "dsh_mnemo.__main__")),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    for rank, (_, patterns) in enumerate(LAYERS):
        if module in patterns:
            return rank
    for rank, (_, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            if pattern.endswith(".*") and (module == pattern[:-2]
                                           or module.startswith(pattern[:-1])):
                return rank
    raise AssertionError(f"{module} belongs to no layer: add it to docs/architecture.md "
                         "and to LAYERS here")


def imports_of(module: str) -> set[str]:
    """The dsh_mnemo modules `module` imports, anywhere in its body."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("dsh_mnemo"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("dsh_mnemo"):
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in MODULES else target)
    found.discard(module)
    return {m for m in found if m in MODULES}


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_only_down_the_layers(module: str) -> None:
    rank = layer_of(module)
    upward = sorted(f"{target} ({LAYERS[layer_of(target)][0]})" for target in GRAPH[module]
                    if layer_of(target) > rank)
    assert not upward, f"{module} ({LAYERS[rank][0]}) imports a higher layer: {upward}"


def test_no_core_module_imports_the_cli() -> None:
    for module, targets in GRAPH.items():
        if not module.startswith(("dsh_mnemo.cli", "dsh_mnemo.__main__")):
            assert not [t for t in targets if t.startswith("dsh_mnemo.cli")], module


def test_there_are_no_import_cycles() -> None:
    # Tarjan's strongly connected components: any component of two or more
    # modules is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert not cycles, f"import cycles: {cycles}"


def test_the_rule_is_written_in_the_architecture_doc() -> None:
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    for name, _ in LAYERS:
        assert f"**{name}**" in text, f"docs/architecture.md does not name the layer {name}"
