"""A recording on disk (``segments``), the recorder that writes it (``recorder``), and
the two wrappers that feed it a scheduler's sessions (``hooks``)."""
