"""The error of a recording that cannot be written or read at all, in a module of its
own: the command line names it among the input errors it reports in one line, and so
need not load the segments' reader and writer (gzip, zlib) to run anything else."""


class RecordingError(ValueError):
    """A recording that cannot be written or read at all, with what and why."""
