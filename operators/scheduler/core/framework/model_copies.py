"""A pydantic model with some of its fields replaced, as ``model_copy(update=...)``
makes it, built at once: the cluster state and a session's close make one for every
status written (a PodGroup's or Queue's status, a condition's time), tens of thousands
a replayed hour, and pydantic's copy goes through three generic copies on the way."""

from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__


def replaced(model: M, update: dict[str, Any]) -> M:
    """``model.model_copy(update=update)``: the same fields, the same fields set, no
    validation of ``update`` (its keys must be ``model``'s fields). A model that keeps
    extra or private values is copied by pydantic itself."""
    if model.__pydantic_extra__ is not None or getattr(model, "__pydantic_private__", None):
        return model.model_copy(update=update)
    cls = type(model)
    new = cls.__new__(cls)
    _set(new, "__dict__", {**model.__dict__, **update})
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_fields_set__", model.__pydantic_fields_set__ | update.keys())
    _set(new, "__pydantic_private__", None)
    return new
