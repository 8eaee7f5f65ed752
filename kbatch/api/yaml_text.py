"""YAML text read the safe way (``yaml.safe_load`` and its kin), by libyaml's parser
when PyYAML was built with it and by PyYAML's own otherwise.

The two build the same objects and nodes from YAML both accept (the same constructor
and resolver; only the scanner and parser differ), and libyaml's reads a file several
times faster. Their errors differ in wording, so text libyaml refuses is read again by
PyYAML's parser: the error raised (or, where the two disagree, the document read) is
PyYAML's own, as it was before libyaml was used.
"""

from typing import Any

import yaml

# libyaml's loader (PyYAML built without it has no CSafeLoader)
_FAST: Any = getattr(yaml, "CSafeLoader", None)


def safe_load(text: str) -> Any:
    """The one document of ``text``, as ``yaml.safe_load`` reads it."""
    if _FAST is not None:
        try:
            return yaml.load(text, Loader=_FAST)
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


def safe_load_all(text: str) -> list[Any]:
    """Every document of ``text``, as ``list(yaml.safe_load_all(text))`` reads them."""
    if _FAST is not None:
        try:
            return list(yaml.load_all(text, Loader=_FAST))
        except yaml.YAMLError:
            pass
    return list(yaml.safe_load_all(text))


def compose(text: str) -> yaml.Node | None:
    """The node tree of ``text``'s one document (with its lines), as ``yaml.compose``
    reads it."""
    if _FAST is not None:
        try:
            return yaml.compose(text, Loader=_FAST)
        except yaml.YAMLError:
            pass
    return yaml.compose(text)
