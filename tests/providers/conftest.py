import pytest
from tests.support.openai_server import openai_server  # noqa: F401

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")
"""The environment the providers read proxies from (upper and lower case)."""


@pytest.fixture(autouse=True)
def _no_proxy_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each provider test sets the proxy and CA-bundle variables it means; none leak in."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)  # it replaces the trust store
