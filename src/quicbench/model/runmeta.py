"""The run's metadata (meta.json): what a run is, where and with what it ran.

Rows have their columns table (model/columns.py); the run has this model. ``RunStore`` is
the only writer of meta.json and checks every write against it: a key that is not a field
here is a bug, refused. Reading is lenient: meta.json files of older formats are upgraded
(store.upgrade_meta) and keys this version does not know are kept as they are.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RunStatus = Literal["created", "running", "complete", "interrupted", "failed", "incomplete"]


class RunMeta(BaseModel):
    """meta.json's fields. Values are plain JSON (dicts where the content belongs to a layer
    below: the lab's description, the link's, a calibration's verdicts)."""
    model_config = ConfigDict(extra="allow")

    # identity and format
    run_id: str | None = None
    format_version: int | None = None
    upgraded_from: int | None = Field(None, description="the format version meta.json was written in")
    columns: list[dict[str, Any]] | None = Field(None, description="the row schema (name, type, unit, meaning, group; "
                                                      "title, header, better, digits)")
    quicbench_version: str | None = None
    # what runs
    plan: dict[str, Any] | None = None
    plan_fingerprint: str | None = None
    conditions: dict[str, dict[str, Any]] | None = Field(None, description="each condition's headline values")
    reps: int | None = None
    reps_changed: list[dict[str, Any]] | None = None
    only: dict[str, list[str]] | None = None
    only_parts: list[Any] | None = Field(None, description="a merge of parts: each input's --only")
    shard: dict[str, int] | None = None
    # the run's life
    status: RunStatus | None = None
    created: float | None = None
    resumed_at: float | None = None
    finished_at: float | None = None
    interrupted_by: str | None = None
    interrupted_at: float | None = None
    failed_reason: str | None = Field(None, description="status failed: why the run stopped (exit 2)")
    # where and with what
    host: dict[str, Any] | None = None
    hosts: dict[str, Any] | None = Field(None, description="a merged run: each input host's facts")
    lab: dict[str, Any] | None = None
    link: dict[str, Any] | None = None
    content: dict[str, Any] | None = None
    tls: dict[str, Any] | None = None
    versions: dict[str, Any] | None = None
    server_ports: dict[str, int] | None = None
    admission: dict[str, Any] | None = Field(None, description="--jobs: the admission policy and its refusals")
    sequential: dict[str, Any] | None = Field(None, description="--until-decided: max_reps, step, looks, alpha per "
                                                                 "look, and each look's undecided cells")
    # measured once per run
    calibration: dict[str, Any] | None = None
    ceiling: dict[str, Any] | None = None
    # a merged run: its inputs, duplicates, missing trials
    merge: dict[str, Any] | None = None


def check_fields(fields: dict[str, Any]) -> None:
    """A write names fields of RunMeta only, with values of their types."""
    unknown = sorted(set(fields) - set(RunMeta.model_fields))
    if unknown:
        raise ValueError(f"meta.json has no field {', '.join(unknown)} (model/runmeta.py RunMeta)")
    RunMeta.model_validate(fields)


def describe() -> list[dict[str, str]]:
    """The fields of meta.json with their meaning, as docs/results-format.md lists them."""
    return [{"name": name, "meaning": f.description or ""} for name, f in RunMeta.model_fields.items()]
