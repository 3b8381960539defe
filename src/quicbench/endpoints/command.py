"""Command lines a plan defines for an endpoint ([client_commands.NAME], [server_commands.NAME]),
shared by the `command` client and server drivers: a command line's argv with its placeholders
filled, the program it runs, and what its version command says. See docs/endpoints.md."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from typing import Any


def expand_command(command: str, values: dict[str, Any]) -> list[str]:
    """The argv of a command line: shlex words, each formatted with values; a word that is exactly
    "{urls}" becomes one argument per URL."""
    argv: list[str] = []
    for word in shlex.split(command):
        if word == "{urls}":
            argv.extend(values["urls"])
        else:
            argv.append(word.format_map(values))
    return argv


def program(command: str) -> str:
    """The program a command line runs, resolved like a shell would (PATH, or a path)."""
    first = shlex.split(command)[0].format_map({"python": sys.executable, "plan_dir": os.getcwd()})
    return (shutil.which(first) or "") if "/" not in first else (first if os.access(first, os.X_OK) else "")


def run_version(command: str | None, name: str) -> dict[str, str]:
    if not command:
        return {}
    argv = expand_command(command, {"python": sys.executable, "plan_dir": os.getcwd()})
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        text = (out.stdout or out.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        text = f"unknown ({e})"
    try:
        parsed = json.loads(text)
        if isinstance(parsed, dict):
            return {str(k): str(v) for k, v in parsed.items()}
    except json.JSONDecodeError:
        pass
    return {name: text.splitlines()[0][:200] if text else ""}
