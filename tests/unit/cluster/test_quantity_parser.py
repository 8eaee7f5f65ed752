"""The cluster layer parses quantities with the kubernetes client's own parser, read
from the client's file so that a command that reads no cluster does not import the
client (``kbatch.cluster.quantity``)."""

import inspect
import subprocess
import sys

import kubernetes.utils.quantity as client_quantity
import pytest

from kbatch.cluster import quantity


def test_the_parser_is_the_clients_own() -> None:
    ours = inspect.getsourcefile(quantity.parse_quantity)
    assert ours == inspect.getsourcefile(client_quantity.parse_quantity)
    for text in ("500m", "1.5Gi", "1e3", "4k", "12"):
        assert quantity.parse_quantity(text) == client_quantity.parse_quantity(text)  # type: ignore[no-untyped-call]


def test_with_the_client_imported_its_module_is_the_one() -> None:
    assert quantity._client_parser_module() is client_quantity


def test_the_command_line_and_the_simulator_import_no_api_client() -> None:
    """``kbatch simulate`` and the commands that read no cluster start without the
    client (a tenth of a second and more); those that read one import it as they run."""
    probe = (
        "import sys, kbatch.cli.main, kbatch.sim.runner\n"
        "from kbatch.cluster.quantity import amount\n"
        "assert amount('cpu', '250m') == 250.0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'urllib3')))"
    )
    # -P: kbatch as installed, not a source tree in the working directory
    done = subprocess.run(
        [sys.executable, "-P", "-c", probe], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_a_quantity_read_again_is_the_same_amount_and_a_bad_one_refused_again() -> None:
    """``amount`` keeps the quantities read last (a failure not): each reads as the
    client's parser gives it, cpu in millicores, however often and in whatever type."""
    for _ in range(2):
        assert quantity.amount("cpu", "500m") == 500.0
        assert quantity.amount("memory", "500m") == 0.5
        assert quantity.amount("cpu", 2) == quantity.amount("cpu", 2.0) == 2000.0
        assert quantity.amount("cpu", "2") == 2000.0
        assert quantity.amount("memory", "4Gi") == 4 * 2**30
        for bad in ("lots", "-1", True, None, "NaN"):
            with pytest.raises(ValueError):
                quantity.amount("cpu", bad)
