"""The nodeorder plugin (being written)."""

from kbatch.config import PluginOption
from kbatch.operators.scheduler.framework.session import Session

NAME = "nodeorder"


def on_session_open(session: Session, option: PluginOption) -> None:
    del session, option
