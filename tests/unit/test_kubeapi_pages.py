"""``kubeapi.pages``: a list read in pages, as client-go's pager reads it."""

from typing import Any

from kbatch import kubeapi


def test_a_list_is_read_page_by_page_until_no_continue_token_is_given() -> None:
    answers = [
        {"metadata": {"continue": "t1"}, "items": [1, 2]},
        {"metadata": {"continue": "t2"}, "items": [3]},
        {"metadata": {"resourceVersion": "7"}, "items": [4]},
    ]
    asked: list[dict[str, str]] = []

    def get(query: dict[str, str]) -> dict[str, Any]:
        asked.append(query)
        return answers[len(asked) - 1]

    read = list(kubeapi.pages(get, {"labelSelector": "a=b"}, page_size=2))
    assert read == answers
    assert asked == [
        {"labelSelector": "a=b", "limit": "2"},
        {"labelSelector": "a=b", "limit": "2", "continue": "t1"},
        {"labelSelector": "a=b", "limit": "2", "continue": "t2"},
    ]


def test_a_server_that_does_not_page_answers_in_one() -> None:
    whole = {"metadata": {"resourceVersion": "1"}, "items": list(range(900))}
    assert list(kubeapi.pages(lambda query: whole, page_size=500)) == [whole]
