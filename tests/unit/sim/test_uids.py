"""The simulator's uids are spelled as ``uuid.UUID`` spells them, formatted directly."""

import uuid

import pytest

from kbatch.sim.backend import uid_of


@pytest.mark.parametrize("number", [1, 9, 10, 255, 65_536, 17_011, 2**64 + 3, 2**128 - 1])
def test_a_uid_reads_as_the_uuid_of_its_number(number: int) -> None:
    assert uid_of(number) == str(uuid.UUID(int=number))
