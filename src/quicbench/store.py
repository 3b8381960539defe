"""The result store: one directory per run, its layout, and the one writer that may change it.

runs/<run-id>/meta.json            the plan, versions, host, lab, link, conditions, format version
                                   and the columns table: the data describes itself
runs/<run-id>/trials.jsonl         one row per finished trial (ok or failed), appended whole and fsynced
runs/<run-id>/trials/<nnnnn>/      per-trial files: requests.jsonl, client.log, summary.json, ...
runs/<run-id>/tls/                 the run's CA and server certificate, made once
runs/<run-id>/servers/<name>/      server configs and logs
runs/<run-id>/served/             while a run serves: its private copy of the content (ContentSet.isolated)
runs/<run-id>/run.lock             held (flock) by the process writing the run

Every path of a run directory is spelled here (RunLayout); readers and writers use it.
"""

from __future__ import annotations

import errno
import fcntl
import gzip
import json
import os
import re
import secrets
import shutil
import stat
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quicbench.errors import EnvironmentFault, QuicbenchError
from quicbench.model import columns, runmeta
from quicbench.model.runmeta import RunMeta
from quicbench.model.columns import FORMAT_VERSION


def new_run_id(tag: str = "") -> str:
    """<time>[-<tag>]-<random>: run ids sort by time, then by tag (a shard's is shardIofN)."""
    return time.strftime("%Y%m%d-%H%M%S") + (f"-{tag}" if tag else "") + "-" + secrets.token_hex(2)


@dataclass(frozen=True)
class RunLayout:
    """Every path of a run directory."""
    dir: Path

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def meta(self) -> Path:
        return self.dir / "meta.json"

    @property
    def trials(self) -> Path:
        return self.dir / "trials.jsonl"

    @property
    def lock(self) -> Path:
        return self.dir / "run.lock"

    @property
    def tls(self) -> Path:
        return self.dir / "tls"

    def server(self, name: str) -> Path:
        return self.dir / "servers" / name

    def trial(self, seq: int) -> Path:
        return self.dir / "trials" / f"{int(seq):05d}"

    def ceiling(self, name: str) -> Path:
        """A fetch of the kernel's ceiling measurement (run/ceiling.py)."""
        return self.dir / "ceiling" / name

    def timeseries(self, seq: int) -> Path:
        return self.trial(seq) / "timeseries.json"

    def report(self, fmt: str = "html") -> Path:
        return self.dir / f"report.{fmt}"


def confined(run_dir: Path, path: Path) -> Path:
    """path, if it stays inside the run directory once its links are followed; else a one-line
    refusal (a reader of a run directory reads only the run's own files)."""
    root = Path(run_dir).resolve()
    real = Path(path).resolve()
    if real != root and not real.is_relative_to(root):
        raise QuicbenchError(f"{path}: a link to {real}, outside the run directory {run_dir}; quicbench reads "
                             f"only a run's own files: remove the link")
    return path


def check_tree(run_dir: Path, top: Path) -> None:
    """Refuse a directory of a run (a trial's, to be copied) that holds a link leaving the run, a
    file with more names than one (a hard link: its other name may be anywhere) or a special file."""
    confined(run_dir, top)
    if not top.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in (*dirnames, *filenames):
            p = Path(dirpath) / name
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                confined(run_dir, p)
            elif stat.S_ISREG(st.st_mode):
                if st.st_nlink > 1:
                    raise QuicbenchError(f"{p}: has {st.st_nlink} names (a hard link, maybe to a file outside "
                                         f"the run directory {run_dir}); quicbench copies only a run's own "
                                         f"files: replace it by a copy")
            elif not stat.S_ISDIR(st.st_mode):
                raise QuicbenchError(f"{p}: not a regular file or directory (a FIFO, socket or device)")


@dataclass
class JsonlRead:
    rows: list[dict[str, Any]]
    torn: list[int]          # 1-based line numbers that are not a JSON object (a torn write)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file; lines that are not one (torn writes) are skipped."""
    return read_jsonl_checked(path).rows


def read_jsonl_checked(path: Path) -> JsonlRead:
    if not path.exists():
        return JsonlRead([], [])
    rows, torn = [], []
    try:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise QuicbenchError(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e}); "
                             f"a {'gzip-compressed ' if path.suffix == '.gz' else ''}JSON-lines file is expected") from None
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            torn.append(n)
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            torn.append(n)
    return JsonlRead(rows, torn)


def read_meta(layout: RunLayout) -> dict[str, Any]:
    """meta.json, upgraded to FORMAT_VERSION; a newer format is refused with a clear message."""
    if not layout.meta.exists():
        return {}
    confined(layout.dir, layout.meta)
    try:
        meta = json.loads(layout.meta.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise QuicbenchError(f"{layout.meta}: not valid JSON ({e})") from None
    except OSError as e:
        raise QuicbenchError(f"{layout.meta}: cannot be read ({e.strerror})") from None
    if not isinstance(meta, dict):
        raise QuicbenchError(f"{layout.meta}: not a run's meta.json (a JSON object is expected, "
                             f"found {type(meta).__name__})")
    return upgrade_meta(meta, str(layout.meta))


def upgrade_meta(meta: dict[str, Any], source: str = "meta.json") -> dict[str, Any]:
    version = meta.get("format_version", 1)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise QuicbenchError(f"{source}: result format version {version} is newer than this quicbench "
                             f"reads ({FORMAT_VERSION}): upgrade quicbench to read it")
    if version < FORMAT_VERSION:
        meta = dict(meta)
        # format 1 stored the plan but neither the columns table nor the conditions' headline values
        meta.setdefault("columns", columns.describe())
        # format 2's columns had name, type, unit, meaning and group: how a column is shown (title,
        # header, direction, digits) is this quicbench's, for the columns it knows
        meta["columns"] = [_upgraded_column(c) for c in meta["columns"]] if isinstance(meta["columns"], list) \
            else meta["columns"]
        meta["format_version"] = FORMAT_VERSION
        meta["upgraded_from"] = version
    return meta


def _upgraded_column(c: Any) -> Any:
    """A column of an older meta.json with the fields format 3 added (this table's, for a column it
    knows; empty for one it does not)."""
    if not isinstance(c, dict):
        return c
    known = columns.BY_NAME.get(str(c.get("name")))
    added = columns.describe_column(known) if known is not None else \
        {"title": "", "header": "", "better": "", "digits": None}
    return {**c, **{k: v for k, v in added.items() if k not in c}}


def _pid_dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _builds_registry() -> Path:
    """Where each build in progress names its temporary directory (cache/builds/PID-TOKEN), so that
    any later command can remove what a killed build left, wherever it was."""
    from quicbench.paths import cache_dir
    return cache_dir() / "builds"


def reap_stale_temporaries() -> list[Path]:
    """What killed processes left: merges' .NAME.building-PID directories (named in the registry)
    and the content and video caches' .tmp-PID-* directories, each removed only when its process
    is gone. Every command calls this (cheap: two globs and the registry)."""
    from quicbench.paths import cache_dir
    removed: list[Path] = []
    reg = _builds_registry()
    for marker in (reg.glob("*") if reg.is_dir() else []):
        pid = marker.name.split("-", 1)[0]
        if not (pid.isascii() and pid.isdigit()) or not _pid_dead(int(pid)):
            continue
        try:
            target = Path(marker.read_text().strip())
        except OSError:
            target = None
        if target is not None and re.fullmatch(rf"\..+\.building-{pid}", target.name) and target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
            removed.append(target)
        marker.unlink(missing_ok=True)
    for sub in ("content", "video"):
        base = cache_dir() / sub
        for d in (base.glob(".tmp-*") if base.is_dir() else []):
            m = re.fullmatch(r"\.tmp-(\d+)-.*", d.name)
            if m and d.is_dir() and _pid_dead(int(m.group(1))):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
    return removed


def reap_unfinished_builds(directory: Path) -> list[Path]:
    """Remove the hidden directories that killed builds (merges) left in directory: those whose
    process is gone (.NAME.building-PID; .NAME.merging-PID of older versions)."""
    removed = []
    for d in [*directory.glob(".*.building-*"), *directory.glob(".*.merging-*")]:
        pid = d.name.rsplit("-", 1)[-1]
        if not (pid.isascii() and pid.isdigit()) or not d.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
            continue                  # its process still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


# set for a quicbench run inside another kernel (User-Mode Linux): the host process running it
HOST_PID_ENV = "QUICBENCH_HOST_PID"


def writer_in_other_kernel(lock_text: str) -> str | None:
    """The holder named in run.lock if it writes from inside User-Mode Linux and the host process
    running that kernel still lives (checked on the host only: inside UML host pids are not
    visible, and the host process that booted it holds the host's lock of a resumed run)."""
    m = re.search(r"host process (\d+)", lock_text)
    if not m or os.environ.get(HOST_PID_ENV) or os.environ.get("QUICBENCH_KERNEL", "host") != "host":
        return None
    pid = int(m.group(1))
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return lock_text.strip()


def refuse_if_written(layout: RunLayout, action: str) -> None:
    """Refuse to <action> a run still being written (its run.lock held by a live process); the lock
    is only tested, read-only."""
    if not layout.lock.exists():
        return
    fd = os.open(layout.lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        other = writer_in_other_kernel(os.pread(fd, 300, 0).decode(errors="replace"))
        if other:
            raise QuicbenchError(f"{layout.dir}: still being written by {other}; {action} it when it ends")
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        raise QuicbenchError(f"{layout.dir}: still being written by {holder}; {action} it when it ends") from None
    finally:
        os.close(fd)


class RunStore:
    """The writer of a run directory. ``acquire()`` makes it the only one."""

    def __init__(self, directory: Path):
        self.layout = RunLayout(Path(directory))
        self.dir = self.layout.dir
        self._lock_fd: int | None = None

    @classmethod
    def create(cls, out: Path, meta: RunMeta, run_id: str | None = None) -> "RunStore":
        """A new run directory under out, held by this process, its meta.json written (run_id set)."""
        out = Path(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
            d = out / (run_id or new_run_id())
            d.mkdir(exist_ok=False)
        except OSError as e:
            raise QuicbenchError(f"--out {out}: cannot create a run directory there ({e.strerror})") from None
        store = cls(d)
        store.acquire()
        store._write_meta({**meta.model_dump(exclude_unset=True), "run_id": store.run_id})
        return store

    @classmethod
    def build(cls, out: Path, meta: RunMeta, rows: list[dict[str, Any]],
              trial_dirs: list[tuple[Path, Path]] = ()) -> "RunStore":
        """A complete run directory at out (missing or empty) from meta, rows and trial directories
        copied in (source, destination relative to the run): built beside out and renamed into
        place, so a failure leaves nothing behind. What `merge` writes."""
        out = Path(out).absolute()      # '.' has no name: the build directory is named after out's
        out.parent.mkdir(parents=True, exist_ok=True)
        reap_unfinished_builds(out.parent)
        tmp = out.parent / f".{out.name}.building-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        marker = _builds_registry() / f"{os.getpid()}-{secrets.token_hex(4)}"
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(str(tmp))
        except OSError:
            marker = None          # no registry (a read-only cache): the next build here still reaps it
        try:
            tmp.mkdir()
            store = cls(tmp)
            store._write_meta({**meta.model_dump(exclude_unset=True), "run_id": out.name})
            for r in rows:
                store.append(r, sync=False)
            for src, rel in trial_dirs:
                shutil.copytree(src, tmp / rel, symlinks=True)
            if out.is_dir() and (out.resolve() == Path.cwd().resolve() or out.is_mount()):
                # an empty directory that cannot be replaced (the caller's working directory, a mount
                # point): move the contents in, meta.json last, so a cut-short move is no run directory
                for child in sorted(tmp.iterdir(), key=lambda c: c.name == "meta.json"):
                    os.rename(child, out / child.name)
                tmp.rmdir()
            else:
                os.rename(tmp, out)   # onto a missing or empty directory
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            if marker is not None:
                marker.unlink(missing_ok=True)
        return cls(out)

    @classmethod
    def open(cls, directory: Path) -> "RunStore":
        d = Path(directory)
        if not (d / "meta.json").exists():
            raise QuicbenchError(f"'{d}' is not a quicbench run directory (no meta.json)")
        return cls(d)

    # -- one writer ------------------------------------------------------------------
    def acquire(self) -> None:
        """Hold the run's lock for the life of this process; refuse if another process holds it.

        A lock taken inside User-Mode Linux is that kernel's own (hostfs does not pass flock to
        the host): such a holder also writes the host process that runs its kernel, and the host
        refuses the directory while that process lives (see writer_in_other_kernel)."""
        fd = os.open(self.layout.lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise QuicbenchError(f"run directory '{self.dir}' is being written by {holder}: "
                                 f"wait for it to end or stop it, then resume") from None
        other = writer_in_other_kernel(os.pread(fd, 300, 0).decode(errors="replace"))
        if other:
            os.close(fd)
            raise QuicbenchError(f"run directory '{self.dir}' is being written by {other}: "
                                 f"wait for it to end or stop it, then resume")
        host = os.environ.get(HOST_PID_ENV)
        os.ftruncate(fd, 0)
        os.pwrite(fd, (f"process {os.getpid()} (quicbench run)"
                       + (f" in User-Mode Linux, host process {host}" if host else "") + "\n").encode(), 0)
        self._lock_fd = fd

    def reserve_space(self, nbytes: int = 256 * 1024) -> None:
        """Set aside space that a full disk gives back: the run can still mark itself interrupted."""
        p = self.dir / ".reserve"
        try:
            with open(p, "wb") as f:
                f.write(b"\0" * nbytes)
        except OSError:
            p.unlink(missing_ok=True)

    def free_reserve(self) -> None:
        (self.dir / ".reserve").unlink(missing_ok=True)

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @property
    def run_id(self) -> str:
        return self.layout.run_id

    @property
    def trials_path(self) -> Path:
        return self.layout.trials

    # -- meta ------------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any]:
        return read_meta(self.layout)

    def meta(self) -> RunMeta:
        """meta.json as its model (upgraded; keys this version does not know kept as extras)."""
        return RunMeta.model_validate(self.read_meta())

    def _write_meta(self, meta: dict[str, Any]) -> None:
        tmp = self.dir / "meta.json.tmp"
        data = json.dumps(meta, indent=2, default=str).encode()
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.layout.meta)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise _disk_fault(e, self.layout.meta) from None

    def update_meta(self, **fields: Any) -> None:
        """Set fields of meta.json; each must be a RunMeta field of its type (model/runmeta.py)."""
        runmeta.check_fields(fields)
        self._write_meta({**self.read_meta(), **fields})

    # -- trials ----------------------------------------------------------------------
    def append(self, row: dict[str, Any], sync: bool = True) -> None:
        """Append one row whole, then fsync (unless sync is False: a directory being built); on a
        short or failed write the file is cut back to where it was, so no torn row is left, and
        the error says why."""
        problems = columns.check_row(row)
        if problems:
            raise ValueError(f"row {row.get('key')!r} does not fit the columns table: {'; '.join(problems)}")
        line = (json.dumps(row, default=str, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.trials_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            start = os.fstat(fd).st_size
            try:
                view = memoryview(line)
                while view:
                    n = os.write(fd, view)
                    if n <= 0:
                        raise OSError(errno.EIO, "write returned 0")
                    view = view[n:]
                if sync:
                    os.fsync(fd)
            except OSError as e:
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    pass
                raise _disk_fault(e, self.trials_path) from None
        finally:
            os.close(fd)

    def rows(self) -> list[dict[str, Any]]:
        """All complete rows; a torn line (killed mid-write) is skipped."""
        return read_jsonl(self.trials_path)

    def trial_dir(self, seq: int) -> Path:
        """An empty directory for a trial; files of an earlier attempt are kept aside, named."""
        d = self.layout.trial(seq)
        if d.exists() and any(d.iterdir()):
            k = 1
            while d.with_name(f"{d.name}.attempt-{k}").exists():
                k += 1
            d.rename(d.with_name(f"{d.name}.attempt-{k}"))
        d.mkdir(parents=True, exist_ok=True)
        return d


def _disk_fault(e: OSError, path: Path) -> QuicbenchError:
    if e.errno == errno.ENOSPC:
        return EnvironmentFault(f"disk full writing {path}: free space, then resume the run")
    return EnvironmentFault(f"cannot write {path}: {e.strerror or e}")
