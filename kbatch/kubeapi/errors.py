"""What a request to the API server raises: the server's HTTP error, or no answer."""


class ApiError(RuntimeError):
    """The API server answered with an HTTP error; ``status`` is its code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Unreachable(ApiError):
    """No answer from the API server: the connection failed or timed out (status 0)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, message)
        self.args = (f"API server unreachable: {message}",)


class Gone(ApiError):
    """410: the resourceVersion asked for is no longer in the server's history."""

    def __init__(self, message: str) -> None:
        super().__init__(410, message)


def message_of(data: bytes) -> str:
    """The server's own message in an error answer's body (its Status), else the body."""
    from kbatch import json_codec

    try:
        message = json_codec.loads(data).get("message", "")
    except (ValueError, AttributeError):
        message = data.decode(errors="replace")[:300]
    return str(message)
