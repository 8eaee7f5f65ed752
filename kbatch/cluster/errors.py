"""Errors about objects that name the object and the field."""


class ObjectError(ValueError):
    """An object kbatch cannot use; ``str()`` reads 'Kind ns/name: field: why'."""

    def __init__(self, ref: str, field: str, why: str) -> None:
        self.ref = ref
        self.field = field
        self.why = why
        super().__init__(f"{ref}: {field}: {why}" if field else f"{ref}: {why}")
