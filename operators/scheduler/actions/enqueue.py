"""The enqueue action (being written)."""

from kbatch.operators.scheduler.framework.session import Session

NAME = "enqueue"


def execute(session: Session) -> None:
    del session
