"""quicbench: compare HTTP/1.1, HTTP/2 and HTTP/3 under emulated network conditions."""

__version__ = "0.1.0"
