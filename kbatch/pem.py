"""A certificate chain and its key held in memory (PEM), loaded into an SSL context:
the ``ssl`` module loads them from files only, so they are written for a moment into a
folder only this user may read (``tempfile`` makes it 0700)."""

import ssl
import tempfile
from pathlib import Path


def load_pair(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """Load ``cert`` and ``key`` into ``context`` (``ssl.SSLError`` if they do not pair)."""
    with tempfile.TemporaryDirectory(prefix="kbatch-") as folder:
        cert_file, key_file = Path(folder, "tls.crt"), Path(folder, "tls.key")
        cert_file.write_bytes(cert)
        key_file.write_bytes(key)
        context.load_cert_chain(cert_file, key_file)
