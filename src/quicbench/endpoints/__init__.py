"""What a server driver and a client driver share, so that servers/ and clients/ sit side by side:
the command lines of the `command` endpoints (command), and the programs and versions of a QUIC
stack whose server and client come from one source (netty, aioquic, and the Debian packages of
ngtcp2's example programs: debian)."""
