"""No module-level switch or cache in kbatch's source: what a shortcut does is chosen
through ``Shortcuts`` (handed to the state, the scheduler and the simulator), and what
lives from one session to the next belongs to the object that owns those sessions (the
``Scheduler``, the state), so that two of them in one process never share it.

An AST scan of every module under kbatch/, operators/ and webhooks/ finds:

- a switch: a module-level ``NAME = True`` / ``NAME = False``;
- a cache: a module-level list, dict or set (a display, a comprehension, or a call of a
  mutable container's class) that the module changes (a mutating method, an item
  assigned or deleted, ``+=``), or any module-level name a function rebinds
  (``global``).

Constants that are never changed (tuples, frozensets, ``MappingProxyType``, dicts only
read) pass, as do memos of pure functions (``functools.lru_cache``). ``ALLOWED`` names
the few exceptions, each with its reason."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SOURCES = ("kbatch", "operators", "webhooks")

# (module path from the repository's root, name) -> why it may stay at module level.
ALLOWED: dict[tuple[str, str], str] = {
    ("kbatch/api/duration.py", "_READ"): (
        "a bounded memo of a pure function (a duration's text to its seconds), as "
        "functools.lru_cache keeps one: its answers are the same whoever asks"
    ),
    ("operators/scheduler/core/plugins/node_index.py", "_INDEXES"): (
        "each session's own node index, keyed weakly by the session: it goes with the "
        "session, and no session reads another's"
    ),
    ("operators/scheduler/core/plugins/pod_affinity.py", "_CHECKS"): (
        "each session's own pod checks, keyed weakly by the session"
    ),
    ("operators/scheduler/core/framework/evictable.py", "_INDEXED"): (
        "each session's own index of running tasks, keyed weakly by the session"
    ),
    ("operators/scheduler/core/framework/topology.py", "_LEVELS"): (
        "each session's own topology levels, keyed weakly by the session"
    ),
}

_CONTAINERS = frozenset(
    {
        "list",
        "dict",
        "set",
        "bytearray",
        "defaultdict",
        "OrderedDict",
        "Counter",
        "deque",
        "WeakKeyDictionary",
        "WeakValueDictionary",
        "WeakSet",
    }
)
_MUTATORS = frozenset(
    {
        "append",
        "appendleft",
        "extend",
        "extendleft",
        "insert",
        "pop",
        "popleft",
        "popitem",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
        "remove",
        "sort",
        "reverse",
        "__setitem__",
        "__delitem__",
    }
)


def _assigned(node: ast.stmt) -> list[tuple[str, ast.expr | None]]:
    """The names a module-level statement binds, with the value bound."""
    if isinstance(node, ast.Assign):
        return [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [(node.target.id, node.value)]
    return []


def _is_container(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        return name in _CONTAINERS
    return False


def _changed_names(tree: ast.Module) -> set[str]:
    """The names the module changes in place, or rebinds from a function (``global``)."""
    changed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            changed.update(node.names)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _MUTATORS and isinstance(node.func.value, ast.Name):
                changed.add(node.func.value.id)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    changed.add(target.value.id)
                if isinstance(node, ast.AugAssign) and isinstance(target, ast.Name):
                    changed.add(target.id)
    return changed


def module_state(source: str) -> list[tuple[str, str]]:
    """(name, what it is) of each module-level switch or changed container in ``source``."""
    tree = ast.parse(source)
    changed = _changed_names(tree)
    found: list[tuple[str, str]] = []
    for node in tree.body:
        for name, value in _assigned(node):
            if name.isupper() and isinstance(value, ast.Constant) and isinstance(value.value, bool):
                found.append((name, "a switch (hand it in through Shortcuts)"))
            elif name in changed and _is_container(value):
                found.append((name, "a container the module changes (a cache: give it an owner)"))
    globals_rebound = {
        n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names
    }
    module_names = {name for node in tree.body for name, _ in _assigned(node)}
    for name in sorted(globals_rebound & module_names):
        if all(name != seen for seen, _ in found):
            found.append((name, "rebound by a function (global)"))
    return found


def _modules() -> list[Path]:
    return sorted(path for top in SOURCES for path in (ROOT / top).rglob("*.py"))


def test_no_module_level_switch_or_cache() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {name} is {what}"
        for path in _modules()
        for name, what in module_state(path.read_text(encoding="utf-8"))
        if (str(path.relative_to(ROOT)), name) not in ALLOWED
    ]
    assert not found, "\n".join(found)


def test_every_allowed_exception_is_still_there() -> None:
    """An exception no longer needed is dropped from ``ALLOWED`` (its reason with it)."""
    present = {
        (str(path.relative_to(ROOT)), name)
        for path in _modules()
        for name, _ in module_state(path.read_text(encoding="utf-8"))
    }
    assert set(ALLOWED) <= present, sorted(set(ALLOWED) - present)


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("KEEP_IT = True\n", ["KEEP_IT"]),
        ("FAST: bool = False\n", ["FAST"]),
        ("_last: list[int] = []\ndef f():\n    _last[:] = [1]\n", ["_last"]),
        ("_seen = {}\ndef f(k):\n    _seen[k] = 1\n", ["_seen"]),
        ("_seen = set()\ndef f(k):\n    _seen.add(k)\n", ["_seen"]),
        ("import weakref\n_by = weakref.WeakKeyDictionary()\ndef f(s):\n    _by[s] = 1\n", ["_by"]),
        ("_n = 0\ndef f():\n    global _n\n    _n += 1\n", ["_n"]),
        ("NAMES = ('a', 'b')\nKINDS = frozenset({'x'})\nTABLE = {'a': 1}\nx = TABLE['a']\n", []),
        ("debug = True\nLIMIT = 3\n", []),
    ],
)
def test_the_scan_finds_switches_and_caches_and_passes_constants(
    source: str, names: list[str]
) -> None:
    assert [name for name, _ in module_state(source)] == names
