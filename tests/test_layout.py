"""The folder shows the architecture: arrows between rmtbase's parts run one way and no two
modules import each other, directly or round a longer circle. Every import counts, the lazy
ones inside functions too (they are how a circle hides)."""

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rmtbase"

#: Each part and its level: a module may import its own part or a part of a lower level
#: (``docs/contract.md``, ``shared/design.md``: cli → studies → report → pipeline → scoring →
#: decision/baseline/models/probe → ensembles/stats → analytic → plumbing).
LEVEL = {
    "errors": 0, "_version": 0, "files": 0, "progress": 0, "_library_bars": 0, "_matmul": 0,
    "_compiled": 0, "_blas": 0, "reporters": 0, "checks": 0, "limits": 0, "registry": 0,
    "analytic": 1,
    "ensembles": 2, "stats": 2,
    "decision": 3, "baseline": 3, "models": 3, "probe": 3, "depth": 3, "plot": 3,
    "scoring": 4,
    "circuits": 4.5,  # reads probe/, models/, scoring/; report/ may read it
    "extend": 4.6,  # the plugins' public face: re-exports stats, models, decision, scoring
    "pipeline": 4.7,  # the score pipeline as one call: reads scoring/, circuits/, probe/
    "report": 5,
    "studies": 6,
    "cli": 7, "_entry": 8, "__main__": 9, "__init__": 10,
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["rmtbase", *parts])


def _imports(path: Path) -> set[str]:
    """Absolute rmtbase module names imported anywhere in ``path``."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("rmtbase"):
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                out.add(sub if _exists(sub) else mod)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("rmtbase")}
    out.discard(name)
    return out


def _exists(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


@functools.cache
def _parsed() -> dict[str, frozenset[str]]:
    """Every module's imports, parsed once per test run (the tree does not change in one)."""
    return {_module_name(p): frozenset(_imports(p)) for p in SRC.rglob("*.py")}


def _graph() -> dict[str, set[str]]:
    return {m: set(deps) for m, deps in _parsed().items()}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_part_has_a_level():
    parts = {_part(m) for m in _graph()}
    assert parts <= set(LEVEL), f"parts without a level: {sorted(parts - set(LEVEL))}"


def test_no_arrow_up():
    bad = []
    for mod, deps in _graph().items():
        a = _part(mod)
        for dep in deps:
            b = _part(dep)
            if a == b or b == "__init__" and dep == "rmtbase":
                continue
            # parts of one level stay apart, except the plumbing (level 0)
            if LEVEL[b] > LEVEL[a] or (LEVEL[b] == LEVEL[a] and LEVEL[a] > 0):
                bad.append(f"{mod} -> {dep}")
    assert not bad, "imports against the layering:\n" + "\n".join(sorted(bad))


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_import_circles():
    graph = _graph()
    # a package's __init__ re-exports its modules; an edge into a package means its __init__
    seen, stack, on_stack, circles = set(), [], set(), []

    def visit(m):
        seen.add(m)
        stack.append(m)
        on_stack.add(m)
        for d in sorted(graph.get(m, ())):
            if d == m.rsplit(".", 1)[0] and m.endswith("__init__"):
                continue
            if d in on_stack:
                circle = stack[stack.index(d):] + [d]
                # a package importing its own submodules is not a circle (a package is a
                # dotted prefix: rmtbase.stats.kquants_low is not inside rmtbase.stats.kquants)
                if not all(_within(x, circle[0]) or _within(circle[0], x) for x in circle):
                    circles.append(" -> ".join(circle))
            elif d not in seen and d in graph:
                visit(d)
        stack.pop()
        on_stack.discard(m)

    for m in sorted(graph):
        if m not in seen:
            visit(m)
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_private_name_across_parts():
    """A name starting with ``_`` is private to its part: another part of rmtbase imports only
    public names (``__version__`` aside), so a part's helpers others use carry public names."""
    bad = []
    for path in SRC.rglob("*.py"):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")
                mod = ".".join(base[: len(base) - (node.level - 1)]
                               + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("rmtbase.") or _part(mod) == _part(name):
                continue
            bad += [f"{name}:{node.lineno} imports {mod}.{a.name}" for a in node.names
                    if a.name.startswith("_") and a.name != "__version__"
                    and not _exists(f"{mod}.{a.name}")]
    assert not bad, "private names imported from another part:\n" + "\n".join(sorted(bad))


#: ``rmtbase.scoring``'s stages and their levels, in pipeline order: a module may import its own
#: stage or a lower one (``docs/contract.md``). Top-level modules are stages of their own.
SCORING_LEVEL = {
    "description": 0, "settings": 0, "measures": 1, "nulls": 2, "stopping": 3, "profile": 4, "heads": 5,
    "composition": 5, "score": 6, "matrices": 7, "collection": 8, "ov": 9, "__init__": 10,
}


def _stage(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["rmtbase", "scoring"]:
        return None
    return parts[2] if len(parts) > 2 else "__init__"


def test_scoring_stages_have_levels():
    stages = {_stage(m) for m in _graph()} - {None}
    assert stages <= set(SCORING_LEVEL), f"stages without a level: {sorted(stages - set(SCORING_LEVEL))}"


def test_scoring_no_arrow_up():
    bad = []
    for mod, deps in _graph().items():
        a = _stage(mod)
        if a is None:
            continue
        for dep in deps:
            b = _stage(dep)
            if b is not None and SCORING_LEVEL[b] > SCORING_LEVEL[a]:
                bad.append(f"{mod} -> {dep}")
    assert not bad, "scoring stages import a later stage:\n" + "\n".join(sorted(bad))


#: ``rmtbase.circuits``' sub-packages and those each may import: the engine (``core``) imports
#: neither front end, each front end the engine, and the front ends not each other
#: (CONTRIBUTING.md); the package's ``__init__`` re-exports them all.
CIRCUITS = {"core": {"core"}, "head": {"core", "head"}, "task": {"core", "task"}}


def _circuits_part(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["rmtbase", "circuits"]:
        return None
    return parts[2] if len(parts) > 2 else "__init__"


def test_circuits_modules_live_in_the_core_or_a_front_end():
    loose = [m for m in _graph() if _circuits_part(m) not in (None, "__init__", *CIRCUITS)]
    assert not loose, f"circuits modules outside core/, head/, task/: {sorted(loose)}"


def test_contributing_names_every_circuits_module():
    """CONTRIBUTING.md's layout table names each module of ``core/``, ``head/`` and ``task/``
    in its own row."""
    import re

    text = (SRC.parents[1] / "CONTRIBUTING.md").read_text(encoding="utf-8")
    missing = []
    for part in CIRCUITS:
        row = re.search(rf"^\| `{part}/` \|(.*)$", text, re.M)
        named = set(re.findall(r"`(\w+)`", row.group(1))) if row else set()
        missing += [f"{part}/{f.stem}" for f in (SRC / "circuits" / part).glob("*.py")
                    if f.stem != "__init__" and f.stem not in named]
    assert not missing, f"CONTRIBUTING.md's circuits table lacks {sorted(missing)}"


def test_circuits_front_ends_stand_on_the_core_alone():
    bad = []
    for mod, deps in _graph().items():
        a = _circuits_part(mod)
        if a not in CIRCUITS:
            continue
        bad += [f"{mod} -> {dep}" for dep in deps
                if _circuits_part(dep) is not None and _circuits_part(dep) not in CIRCUITS[a]]
    assert not bad, "circuits imports against core <- head, task:\n" + "\n".join(sorted(bad))
