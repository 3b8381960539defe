"""One colour and one marker per protocol, used by every plot and table of every report.

Okabe-Ito colours (distinguishable with the common colour-vision deficiencies); markers and
line styles differ too, so the plots also read in greyscale.
"""

from __future__ import annotations

PROTOCOL_COLORS = {"h1": "#0072B2", "h2": "#E69F00", "h3": "#009E73"}
PROTOCOL_MARKERS = {"h1": "o", "h2": "s", "h3": "^"}
PROTOCOL_LINESTYLES = {"h1": "-", "h2": "--", "h3": "-."}
PROTOCOL_LABELS = {"h1": "HTTP/1.1 (h1)", "h2": "HTTP/2 (h2)", "h3": "HTTP/3 (h3)"}
OTHER = ["#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]

# connection phases (httpstat's order); greys and a purple, never a protocol colour
PHASE_COLORS = {"connect_ms": "#BBBBBB", "tls_ms": "#777777", "wait_ms": "#CC79A7", "transfer_ms_p50": "#333333"}
PHASE_LABELS = {"connect_ms": "connect", "tls_ms": "TLS handshake", "wait_ms": "server wait (TTFB rest)",
                "transfer_ms_p50": "content transfer (median request)"}

# diverging map for "% difference", centred on 0
DIVERGING_CMAP = "RdBu"


def color(protocol: str) -> str:
    if protocol in PROTOCOL_COLORS:
        return PROTOCOL_COLORS[protocol]
    return OTHER[sum(map(ord, protocol)) % len(OTHER)]


def marker(protocol: str) -> str:
    return PROTOCOL_MARKERS.get(protocol, "D")


def linestyle(protocol: str) -> str:
    return PROTOCOL_LINESTYLES.get(protocol, ":")


def label(protocol: str) -> str:
    return PROTOCOL_LABELS.get(protocol, protocol)
