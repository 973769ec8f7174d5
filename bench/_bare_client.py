"""The bare client as its own program: send prepared request bodies with aiohttp, then exit.

`python -m bench._bare_client BODIES_FILE URL CONCURRENCY` reads one JSON request body per line
(written beforehand by the bench, unmeasured), sends them with `CONCURRENCY` workers on one
aiohttp session and prints the wall clock (`time.time()`) when it sent its first request and when
it read its last response, then how many got HTTP 200. It imports nothing but the standard library
and aiohttp, so its process wall, from exec to exit, is what a hand-written client costs a user:
the floor for `trustbench run`'s process wall (issue 35).
"""

from __future__ import annotations

import asyncio
import sys
import time

import aiohttp


async def _send_all(bodies: list[bytes], url: str, concurrency: int) -> tuple[float, float, int]:
    pending = iter(bodies)
    ok = 0
    first = last = 0.0
    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal ok, first, last
            for body in pending:
                first = first or time.time()
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()
                    ok += response.status == 200
                last = time.time()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return first, last, ok


def main() -> None:
    path, url, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(path, "rb") as stream:
        bodies = [line.rstrip(b"\n") for line in stream if line.strip()]
    first, last, ok = asyncio.run(_send_all(bodies, url, concurrency))
    print(f"{first:.6f} {last:.6f} {ok}")


if __name__ == "__main__":
    main()
