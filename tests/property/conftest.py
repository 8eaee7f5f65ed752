"""The tally of generated inputs: printed only when asked for, so a normal run prints nothing.

KBATCH_PROPERTY_REPORT=1 pytest tests/property                  # inputs tried, by test
KBATCH_PROPERTY_TALLY=1 KBATCH_PROPERTY_EXAMPLES=1000 pytest tests/property
                                                                # ... and escapes counted
"""

import os
from typing import Any

from property import junk


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not (junk.TALLY or os.environ.get("KBATCH_PROPERTY_REPORT") == "1"):
        return
    write = terminalreporter.write_line
    write(
        f"generated inputs: {sum(junk.GENERATED.values())}, escaped: {sum(junk.ESCAPED.values())}"
    )
    for test in sorted(junk.GENERATED):
        write(f"  {test}: {junk.GENERATED[test]} generated, {junk.ESCAPED[test]} escaped")
        if test in junk.FIRST_ESCAPES:
            write(f"    first: {junk.FIRST_ESCAPES[test]}")
