"""What the command line needs of the scheduler conf before it loads it (``kbatch.config``
builds its pydantic models on import, a fifth of a second): the error a conf that
cannot be used raises, and the ETA's defaults it shows in its help."""


class ConfigError(ValueError):
    """A scheduler configuration that cannot be used; the message says where and why."""


# Seconds of wall time after which an ETA forecast stops simulating (kbatch.visibility.eta).
ETA_BUDGET_SECONDS = 30.0
# How old an estimate published on a PodGroup (kbatch.visibility.published) may be for
# kbatch jobs/explain --eta to read it rather than compute one.
ETA_FRESH_SECONDS = 120.0
