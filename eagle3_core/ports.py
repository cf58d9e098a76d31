"""A free TCP port on this machine: the one helper every process that listens on loopback uses (vLLM
servers, the trainer's torch.distributed rendezvous, the tests' Prefect servers). Standard library only:
the trainer imports it before torch."""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing listens on now (the kernel's pick): free when asked, so bind it soon."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
