"""The package's layers import one way: tasks <- core <- training <- search <- results <- cli.

docs/development.md states the rule; this test reads every module's imports (the ones inside
functions too, which is where the lazy heavy imports live) and names any that runs back up.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ratiotune"
# Lowest first: a module may import its own layer and the ones before it, never one after.
LAYERS = ["tasks", "core", "training", "search", "results"]
TOP_LEVEL = {"__init__.py", "__main__.py", "cli.py"}  # the command line: above every layer
DATA = "data"  # prompt files; its empty __init__.py lets importlib.resources find them


def rank(parts: tuple[str, ...]) -> int:
    """The layer rank of a module given by its dotted parts after `ratiotune`."""
    if parts and parts[0] in LAYERS:
        return LAYERS.index(parts[0])
    return len(LAYERS)


def imported(source: str) -> list[tuple[int, tuple[str, ...]]]:
    """(line, dotted parts after `ratiotune`) for every ratiotune import in a module's source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from ratiotune import cli` names a module; `from ratiotune.core import study` too.
            names = [node.module] if node.module != "ratiotune" else [f"ratiotune.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "ratiotune":
                found.append((node.lineno, tuple(parts[1:])))
    return found


def upward_imports(path: Path, source: str) -> list[str]:
    relative = path.relative_to(PACKAGE).parts
    own = rank(relative) if len(relative) > 1 else len(LAYERS)
    return [
        f"{path.relative_to(PACKAGE)}:{line} imports ratiotune.{'.'.join(parts)}"
        for line, parts in imported(source)
        if rank(parts) > own
    ]


def test_no_module_imports_a_higher_layer():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 30  # the walk found the package
    problems = [p for path in modules for p in upward_imports(path, path.read_text())]
    assert problems == []


def test_every_module_lives_in_a_layer():
    top = {path.name for path in PACKAGE.glob("*.py")}
    assert top == TOP_LEVEL
    folders = {path.parent.relative_to(PACKAGE).parts[0] for path in PACKAGE.rglob("*.py") if path.parent != PACKAGE}
    assert folders == set(LAYERS) | {DATA}
    assert (PACKAGE / DATA / "__init__.py").read_text().strip() == ""


def test_the_check_catches_an_upward_import():
    # The rule can fail: a core module importing the search layer, lazily inside a function.
    source = "def f():\n    from ratiotune.search import race\n    import ratiotune.results.report\n"
    problems = upward_imports(PACKAGE / "core" / "example.py", source)
    assert problems == ["core/example.py:2 imports ratiotune.search", "core/example.py:3 imports ratiotune.results.report"]
    # ... and lets a downward one through.
    assert upward_imports(PACKAGE / "search" / "example.py", "from ratiotune.core import study\n") == []


# The task contract, as the layers above it may see it: the package (load_task, TaskError, ...), base.py and
# records.py (prompt sets -> records); never a concrete task module (length_ratio, headline_expansion, ...).
TASK_CONTRACT = {("tasks",), ("tasks", "base"), ("tasks", "records")}
# Files whose words belong to one task: the layers above the contract must not know a task by its metrics.
TASK_WORDS = ("mean_chars_agent", "target_min", "target_max", "DEFAULT_TARGET")


def concrete_task_imports(path: Path, source: str) -> list[str]:
    """Imports of a concrete task (ratiotune.tasks.length_ratio, ...) from above the task layer."""
    relative = path.relative_to(PACKAGE).parts
    if relative[0] == "tasks":
        return []
    return [
        f"{path.relative_to(PACKAGE)}:{line} imports ratiotune.{'.'.join(parts)}"
        for line, parts in imported(source)
        if parts[:1] == ("tasks",) and parts[:2] not in TASK_CONTRACT
    ]


def test_search_and_results_know_no_concrete_task():
    """A task owns its figures and words (Task.figures): search/, results/ and core/ reach tasks only
    through the contract, and name none of one task's metrics or options."""
    problems = []
    for layer in ("core", "training", "search", "results"):
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            source = path.read_text()
            problems += concrete_task_imports(path, source)
            if layer in ("search", "results"):
                problems += [f"{path.relative_to(PACKAGE)} names {word!r}" for word in TASK_WORDS if word in source]
    assert problems == []


def test_the_concrete_task_check_can_fail():
    source = "def f():\n    from ratiotune.tasks.length_ratio import make_task\n    from ratiotune.tasks import load_task\n"
    assert concrete_task_imports(PACKAGE / "search" / "example.py", source) == [
        "search/example.py:2 imports ratiotune.tasks.length_ratio"
    ]
    assert concrete_task_imports(PACKAGE / "tasks" / "example.py", source) == []


STUDY = PACKAGE / "core" / "study"


def study_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """core/study's modules (by stem; the package is __init__) -> the ones among them each imports, anywhere in it."""
    graph = {}
    for stem, source in sources.items():
        targets = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from ratiotune.core.study import schema` names a module; `... import Study` the package.
                names = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}".split(".")[-1] in sources]
                names = names or [node.module]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[:3] == ["ratiotune", "core", "study"]:
                    targets.add(parts[3] if len(parts) > 3 else "__init__")
        graph[stem] = targets - {stem}
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of the graph as [a, b, ..., a], or [] when it has none (depth-first search)."""
    state: dict[str, str] = {}  # "open" while on the path, "done" once every module below it is seen

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state:
                found = visit(target, path + [target])
                if found:
                    return found
        state[node] = "done"
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return []


def test_the_study_modules_import_without_a_cycle():
    # A cycle is what lazy imports inside functions and `if TYPE_CHECKING:` blocks hide; those count here.
    sources = {path.stem: path.read_text() for path in sorted(STUDY.glob("*.py"))}
    assert {"schema", "prompts", "task", "__init__"} <= set(sources)
    assert import_cycle(study_graph(sources)) == []


def test_the_cycle_check_can_fail():
    sources = {
        "schema": "from ratiotune.core.study.task import make_task\n",
        "task": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ratiotune.core.study.prompts import X\n",
        "prompts": "def f():\n    from ratiotune.core.study import schema\n",
        "errors": "",
    }
    assert import_cycle(study_graph(sources)) == ["prompts", "schema", "task", "prompts"]
    assert import_cycle(study_graph({**sources, "prompts": ""})) == []
