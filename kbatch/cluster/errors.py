"""Errors about objects and inputs that name the object (or file) and the field."""


class ObjectError(ValueError):
    """An object kbatch cannot use; ``str()`` reads 'Kind ns/name: field: why'."""

    def __init__(self, ref: str, field: str, why: str) -> None:
        self.ref = ref
        self.field = field
        self.why = why
        super().__init__(f"{ref}: {field}: {why}" if field else f"{ref}: {why}")


class ManifestError(ValueError):
    """An input that cannot be simulated; the message names the file, document and field.

    Here, not in ``kbatch.sim.manifests`` (which re-exports it), so that ``kbatch``'s
    command line can name it without loading the simulator."""
