"""The review app under fuzzed forms and a DNS-rebinding Host: 400 or 403, never 500."""

from __future__ import annotations

from pathlib import Path

from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.rtb.test_human_app import serve
from tests.rtb.test_human_fixtures import runs  # noqa: F401
from tests.support.cli import invoke

VALID = (
    b"--zzz\r\n"
    b'Content-Disposition: form-data; name="decision"\r\n\r\npermit\r\n'
    b"--zzz\r\n"
    b'Content-Disposition: form-data; name="explanation"\r\n\r\nok\r\n'
    b"--zzz--\r\n"
)

mutations = st.lists(
    st.one_of(
        st.integers(0, len(VALID)).map(lambda n: VALID[:n]),  # truncated
        st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)).map(
            lambda p: VALID[: p[0]] + bytes([p[1]]) + VALID[p[0] + 1 :]  # one byte changed
        ),
        st.binary(max_size=200),  # anything at all
        st.binary(max_size=60).map(lambda junk: VALID.replace(b"form-data", junk, 1)),
    ),
    min_size=20,
    max_size=20,
)
content_types = st.sampled_from(
    [
        "multipart/form-data; boundary=zzz",
        "multipart/form-data",
        "multipart/form-data; boundary=",
        'multipart/form-data; boundary="zz',
        "application/x-www-form-urlencoded",
        "multipart/mixed; boundary=zzz",
    ]
)


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # each example serves a session: no shrinking
    suppress_health_check=list(HealthCheck),
)
@given(bodies=mutations, kinds=st.lists(content_types, min_size=20, max_size=20))
def test_fuzzed_form_bodies_are_never_answered_500(
    runs: tuple[Path, Path],  # noqa: F811
    bodies: list[bytes],
    kinds: list[str],
) -> None:
    _, human_dir = runs

    async def driver(client: TestClient, tokens: dict[str, str]) -> list[int]:
        url = f"/s/{tokens['sre-cab-p01']}/submit"
        await client.get(f"/s/{tokens['sre-cab-p01']}")
        statuses = []
        for body, kind in zip(bodies, kinds, strict=True):
            response = await client.post(
                url, data=body, headers={"Content-Type": kind}, allow_redirects=False
            )
            statuses.append(response.status)
        return statuses

    statuses = serve(human_dir, driver)
    assert all(status < 500 for status in statuses), statuses


def test_a_dns_rebinding_host_is_refused_on_every_route(
    runs: tuple[Path, Path],  # noqa: F811
) -> None:
    _, human_dir = runs

    async def driver(client: TestClient, tokens: dict[str, str]) -> dict[str, int]:
        port = client.server.port
        base = f"/s/{tokens['sre-cab-p01']}"
        evil = f"evil.example:{port}"
        found = {}
        # The attacker's page: its Origin and the Host agree (both the attacker's name).
        for name, method, path in (("get", "GET", base), ("pause", "POST", f"{base}/pause")):
            response = await client.request(
                method,
                path,
                headers={"Host": evil, "Origin": f"http://{evil}"},
                allow_redirects=False,
            )
            found[name] = response.status
        own = await client.get(base, headers={"Host": f"localhost:{port}"})
        found["localhost"] = own.status
        return found

    assert serve(human_dir, driver) == {"get": 403, "pause": 403, "localhost": 200}


def test_serve_refuses_a_port_outside_tcp_naming_it(tmp_path: Path) -> None:
    for port in ("99999", "-1"):
        code, message = invoke("rtb", "human", "serve", str(tmp_path), "--port", port)
        assert code == 2 and "--port" in message and port in message
