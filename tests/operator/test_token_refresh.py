"""The client's token refresh hook runs at most once a second (``kubeapi.TokenRefresh``):
a token that expires is still refreshed, and the new hook the kubeconfig loader installs
each time it runs is the one run next."""

from typing import Any

from kubernetes import client

from kbatch import kubeapi


class Loader:
    """What kubernetes' kubeconfig loader does: its hook sets the token and installs a
    new hook (a new closure) on every run."""

    def __init__(self) -> None:
        self.runs = 0
        self.token = "first"

    def install(self, configuration: Any) -> None:
        def refresh(configuration: Any) -> None:
            self.runs += 1
            configuration.api_key["BearerToken"] = self.token
            self.install(configuration)

        configuration.refresh_api_key_hook = refresh


def throttled(loader: Loader, clock: list[float], monkeypatch: Any) -> Any:
    monkeypatch.setattr(kubeapi.client.time, "monotonic", lambda: clock[0])
    configuration = client.Configuration()
    loader.install(configuration)
    kubeapi.refresh_tokens_at_most_every_second(client.ApiClient(configuration))
    return configuration


def test_the_hook_runs_at_most_once_a_second(monkeypatch: Any) -> None:
    loader, clock = Loader(), [100.0]
    configuration = throttled(loader, clock, monkeypatch)
    for _ in range(5):
        assert configuration.get_api_key_with_prefix("BearerToken") == "first"
    assert loader.runs == 1
    clock[0] += 0.5
    configuration.get_api_key_with_prefix("BearerToken")
    assert loader.runs == 1
    clock[0] += 0.6
    loader.token = "second"  # the loader refreshed an expiring token
    assert configuration.get_api_key_with_prefix("BearerToken") == "second"
    assert loader.runs == 2


def test_the_loaders_new_hook_is_kept_and_throttled(monkeypatch: Any) -> None:
    loader, clock = Loader(), [100.0]
    configuration = throttled(loader, clock, monkeypatch)
    hook = configuration.refresh_api_key_hook
    for _ in range(3):
        configuration.get_api_key_with_prefix("BearerToken")
        clock[0] += 2.0
        assert configuration.refresh_api_key_hook is hook, "still throttled after a run"
    assert loader.runs == 3


def test_a_client_without_a_hook_is_left_alone() -> None:
    api = kubeapi.refresh_tokens_at_most_every_second(client.ApiClient(client.Configuration()))
    assert api.configuration.refresh_api_key_hook is None
