"""A light asyncio HTTP/1.1 client for many concurrent streaming requests (the SDK's per-stream cost would dominate
on 2 cores). Each stream is read to its end and its SSE events are returned parsed."""

import asyncio
import json


async def stream_request(host, port, path, body, timeout=120.0):
    """POSTs `body` (a dict) and returns (status, [events as dicts], saw_done)."""
    payload = json.dumps(body).encode()
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\nContent-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout)  # the server closes after the response
    finally:
        writer.close()
    head, _, body_bytes = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    if b"transfer-encoding: chunked" in head.lower():
        body_bytes = dechunk(body_bytes)
    events, done = [], False
    for block in body_bytes.decode().split("\n\n"):
        if not block.startswith("data: "):
            continue
        data = block[6:]
        if data == "[DONE]":
            done = True
        else:
            events.append(json.loads(data))
    return status, events, done


def dechunk(data: bytes) -> bytes:
    out, pos = bytearray(), 0
    while True:
        end = data.index(b"\r\n", pos)
        size = int(data[pos:end], 16)
        if size == 0:
            return bytes(out)
        out += data[end + 2:end + 2 + size]
        pos = end + 2 + size + 2


def run_many(url, path, bodies, timeout=120.0):
    host, port = url.removeprefix("http://").split(":")

    async def main():
        return await asyncio.gather(*(stream_request(host, int(port), path, b, timeout) for b in bodies))

    return asyncio.run(main())
