"""YAML text read the safe way (``yaml.safe_load`` and its kin), by libyaml's parser
when PyYAML was built with it and by PyYAML's own otherwise.

The two build the same objects and nodes from YAML both accept (the same constructor
and resolver; only the scanner and parser differ), and libyaml's reads a file several
times faster. Their errors differ in wording, so text libyaml refuses is read again by
PyYAML's parser: the error raised (or, where the two disagree, the document read) is
PyYAML's own, as it was before libyaml was used.
"""

from collections.abc import Callable
from typing import Any, TypeVar

import yaml

T = TypeVar("T")

# libyaml's loader (PyYAML built without it has no CSafeLoader)
_FAST: Any = getattr(yaml, "CSafeLoader", None)


def _read(read: Callable[[str, Any], T], text: str) -> T:
    """``read(text, loader)`` with libyaml's loader, or with PyYAML's own safe loader when
    there is no libyaml or it refuses the text. ``read`` builds the whole result, so an
    error in a later document is met inside the first try."""
    if _FAST is not None:
        try:
            return read(text, _FAST)
        except yaml.YAMLError:
            pass
    return read(text, yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """The one document of ``text``, as ``yaml.safe_load`` reads it."""
    return _read(lambda t, loader: yaml.load(t, Loader=loader), text)


def safe_load_all(text: str) -> list[Any]:
    """Every document of ``text``, as ``list(yaml.safe_load_all(text))`` reads them."""
    return _read(lambda t, loader: list(yaml.load_all(t, Loader=loader)), text)


def compose(text: str) -> yaml.Node | None:
    """The node tree of ``text``'s one document (with its lines), as ``yaml.compose``
    reads it (its loader's resolver is the safe loader's: the same nodes)."""
    return _read(lambda t, loader: yaml.compose(t, Loader=loader), text)
