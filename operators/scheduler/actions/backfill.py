"""The backfill action (being written)."""

from kbatch.operators.scheduler.framework.session import Session

NAME = "backfill"


def execute(session: Session) -> None:
    del session
