"""The allocate action (being written)."""

from kbatch.operators.scheduler.framework.session import Session

NAME = "allocate"


def execute(session: Session) -> None:
    del session
