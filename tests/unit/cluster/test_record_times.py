"""A record's times (``records.timestamp``): RFC 3339 texts to epoch seconds, the texts
read last kept; a bad one refused naming its field each time it is read."""

from datetime import UTC, datetime

import pytest

from kbatch.cluster import fields, records


def test_a_time_read_again_is_the_same_seconds() -> None:
    text = "2024-01-01T00:01:30Z"
    seconds = datetime(2024, 1, 1, 0, 1, 30, tzinfo=UTC).timestamp()
    assert records.timestamp(text) == seconds
    assert records.timestamp(text) == seconds
    assert records.timestamp("2024-01-01T00:01:30+00:00") == seconds
    assert records.timestamp(None) == 0.0 and records.timestamp("") == 0.0


@pytest.mark.parametrize("bad", ["soon", "2024-13-01T00:00:00Z", 3, ["2024-01-01T00:00:00Z"]])
def test_a_bad_time_is_refused_naming_its_field_each_time(bad: object) -> None:
    for _ in range(2):
        with pytest.raises(fields.FieldError) as refused:
            records.timestamp(bad, "status.startTime")
        assert refused.value.field == "status.startTime"
