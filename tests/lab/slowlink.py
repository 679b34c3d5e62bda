"""A TCP relay with a bandwidth limit: the lab's slow link to a distant registry.

Relays every connection on --listen to --to, each direction limited to --rate bytes per second
(shared by all connections), so that a pull of a few MB lasts seconds: long enough to kill it, or
to look at a node while it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import time


class Bucket:
    """A token bucket shared by the connections of one direction."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.tokens = rate / 10
        self.stamp = time.monotonic()
        self.lock = asyncio.Lock()

    async def take(self, n: int) -> None:
        async with self.lock:
            while True:
                now = time.monotonic()
                self.tokens = min(self.rate / 10, self.tokens + (now - self.stamp) * self.rate)
                self.stamp = now
                if self.tokens >= n:
                    self.tokens -= n
                    return
                await asyncio.sleep((n - self.tokens) / self.rate)


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, bucket: Bucket) -> None:
    try:
        while chunk := await reader.read(16384):
            await bucket.take(len(chunk))
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def serve(listen: tuple[str, int], to: tuple[str, int], rate: float) -> None:
    down, up = Bucket(rate), Bucket(rate)

    async def relay(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*to)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(pump(client_r, server_w, up), pump(server_r, client_w, down))

    server = await asyncio.start_server(relay, *listen)
    async with server:
        await server.serve_forever()


def address(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--listen", type=address, required=True, help="HOST:PORT to accept on")
    parser.add_argument("--to", type=address, required=True, help="HOST:PORT to relay to")
    parser.add_argument("--rate", type=float, required=True, help="bytes per second, each direction")
    args = parser.parse_args()
    asyncio.run(serve(args.listen, args.to, args.rate))


if __name__ == "__main__":
    main()
