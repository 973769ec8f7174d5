"""Confining a candidate's worker process: namespaces, Landlock, what it may read, what it reached.

Every piece of candidate code the harness runs (a TRB adapter, an RTB in-process reviewer,
workflow agent or boundary) runs in a worker process that confines itself with `confine` before
it imports the candidate's module, so import-time code runs confined too:

1. `unshare(CLONE_NEWUSER | CLONE_NEWIPC [| CLONE_NEWNET])`: its own IPC namespace (System V
   shared memory, message queues and semaphores are not shared with the host or with another
   candidate's worker) and, unless the spec declares an endpoint, its own network namespace
   (no interface but a loopback that is down). The user namespace maps the worker's own uid and
   gid, so file ownership reads as before.
2. Landlock (through raw system calls): an allow-list of readable paths (`read_paths`: the
   interpreter, its libraries, the trustbench package's code, the candidate's module folder)
   minus the hidden ones (`hidden`: every data file of the trustbench package - corpora, labels,
   schemas, prompts, reference reviews -, the run folder, the cache, a held-out set and its key),
   its own empty folder read-write, and nothing else (not /proc, not the user's home). With
   declared endpoints and Landlock ABI >= 4, TCP connect is allowed only to their ports and bind
   is refused. Signals and abstract unix sockets outside the sandbox are refused where the ABI can.
3. `reachable` then tries to open the known secret paths the harness names and reports what it
   could read: the report's "answer key available to the candidate" line is this probe, not a
   guess from the environment.

Where Landlock or the namespaces cannot be set up, `confine` raises `SandboxUnavailable` and the
harness refuses to run the candidate unless the spec says `isolation = "none"`. The Python audit
hook (`install_audit_hook`) is kept only as an explicit fallback for tests: native code bypasses it.

The Landlock constants are the kernel's uapi (`include/uapi/linux/landlock.h`); the system call
numbers 444-446 are the same on every architecture that has them.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import subprocess
import sys
from collections.abc import Iterable, Sequence
from typing import Any

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWIPC, _CLONE_NEWUSER, _CLONE_NEWNET = 0x08000000, 0x10000000, 0x40000000

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ABI1_ALL = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | _TRUNCATE | _IOCTL_DEV
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
"""Rights of a read-only path (execute included: shared libraries are mapped executable)."""

CODE_SUFFIXES = (".py", ".pyc", ".typed")
"""Files of the trustbench package a worker may read; every other file there is data (hidden)."""

SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/etc", "/dev/null", "/dev/urandom")
"""System paths every worker may read: the dynamic loader, shared libraries, locale data."""


class SandboxUnavailable(Exception):
    """The sandbox cannot be set up here (the message says why); nothing was restricted."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        value = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(value), 0)


def _check(value: int, what: str) -> int:
    if value < 0:
        errno = ctypes.get_errno()
        raise SandboxUnavailable(f"{what} failed: {os.strerror(errno)}")
    return value


# ------------------------------------------------------------------------------------------------
# Namespaces: IPC (always) and network (unless an endpoint is declared), inside a user namespace.


def enter_namespaces(*, network: bool) -> str:
    """Move this process into new user and IPC namespaces (and a network one unless `network`).

    Must run while the process has one thread (the kernel refuses `unshare(CLONE_NEWUSER)`
    otherwise), before Landlock (which would refuse the writes to /proc/self).

    Returns:
        The part of the mode naming the namespaces, e.g. "ipc/net namespaces".
    """
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable("namespaces need Linux")
    uid, gid = os.getuid(), os.getgid()
    flags = _CLONE_NEWUSER | _CLONE_NEWIPC | (0 if network else _CLONE_NEWNET)
    _check(_libc().unshare(flags), "unshare(user, ipc" + ("" if network else ", net") + ")")
    try:  # map our own ids, so files we own stay ours and new files can be created
        with open("/proc/self/setgroups", "w") as setgroups:
            setgroups.write("deny")
        with open("/proc/self/uid_map", "w") as uid_map:
            uid_map.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as gid_map:
            gid_map.write(f"{gid} {gid} 1")
    except OSError as error:
        raise SandboxUnavailable(f"mapping the user namespace failed: {error}") from None
    return "ipc namespace" if network else "ipc/net namespaces"


_NAMESPACE_CHECK = (
    "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
    f"os._exit(0 if libc.unshare({_CLONE_NEWUSER | _CLONE_NEWIPC | _CLONE_NEWNET}) == 0 else 1)"
)


@functools.cache
def platform_problem() -> str | None:
    """Why the sandbox cannot be set up on this machine, or None where it can (checked once).

    The harness asks before it runs any candidate code: a platform without it refuses to run
    unless the spec says `isolation = "none"`.
    """
    if abi_version() < 1:
        return "this kernel has no Landlock (Linux >= 5.13 with it enabled)"
    check = subprocess.run(
        [sys.executable, "-S", "-c", _NAMESPACE_CHECK], capture_output=True, timeout=30, check=False
    )
    if check.returncode != 0:
        return "this machine refuses new user/IPC/network namespaces (unshare)"
    return None


# ------------------------------------------------------------------------------------------------
# What a worker may read: the allow-list with the hidden paths carved out.
#
# Landlock rules are inherited by everything beneath a folder, and cannot be subtracted, so a
# readable folder that holds a hidden path (the trustbench package holds its corpora; a venv's
# site-packages may hold an installed trustbench; the candidate's folder may hold a run folder) is
# split: the folder itself gets listing rights only, and each entry beside the hidden path is
# granted on its own, recursively down to the hidden path, which gets nothing.


def package_data(package: str) -> list[str]:
    """Every data file of the trustbench package (anything but code): corpora, labels, schemas."""
    found: list[str] = []
    for folder, _dirs, files in os.walk(package):
        found += [os.path.join(folder, f) for f in files if not f.endswith(CODE_SUFFIXES)]
    return found


def _ancestors(paths: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for path in paths:
        parent = os.path.dirname(path)
        while parent and parent not in out:
            out.add(parent)
            if parent == os.path.dirname(parent):
                break
            parent = os.path.dirname(parent)
    return out


def _at_or_under(path: str, folders: set[str]) -> bool:
    """Whether `path` is one of `folders` or lies beneath one of them."""
    while True:
        if path in folders:
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def read_rules(read_paths: Iterable[str], hidden: Iterable[str]) -> list[tuple[str, int]]:
    """(path, rights) rules granting `read_paths` except everything at or under `hidden`."""
    secret = {os.path.realpath(h) for h in hidden}
    above = _ancestors(secret)
    rules: list[tuple[str, int]] = []
    covered: set[str] = set()

    def cover(path: str) -> None:
        if path in covered:  # a link back to a folder already covered (a cycle): nothing new
            return
        covered.add(path)
        if path not in above:
            rules.append((path, READ))
            return
        rules.append((path, READ_DIR))  # listing only: the names beneath, not their contents
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            child = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
            if not _at_or_under(child, secret):
                cover(child)

    for path in dict.fromkeys(os.path.realpath(p) for p in read_paths):
        if os.path.exists(path) and not _at_or_under(path, secret):
            cover(path)
    return rules


# ------------------------------------------------------------------------------------------------
# Landlock.


def _handled_fs(abi: int) -> int:
    handled = _ABI1_ALL
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    if abi >= 5:
        handled |= _IOCTL_DEV
    return handled


def _add_path_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int, handled: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist grants nothing
    try:
        allowed = rights & handled
        if not os.path.isdir(path):
            allowed &= _FILE_RIGHTS
        rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, fd), 12)
        _check(libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0), "landlock add_rule")
    finally:
        os.close(fd)


def restrict(
    rules: Sequence[tuple[str, int]], write_paths: Iterable[str], ports: Sequence[int] | None
) -> str:
    """Restrict this process (and its future children) to `rules` and `write_paths`, for good.

    Args:
        rules: (path, rights) read rules (`read_rules`).
        write_paths: Folders it may read, write, create and delete in.
        ports: With ABI >= 4, the only TCP ports it may connect to (bind refused); None leaves
            TCP to the network namespace.

    Returns:
        The Landlock part of the mode, e.g. "landlock ABI 7".
    """
    abi = abi_version()
    if abi < 1:
        raise SandboxUnavailable("this kernel has no Landlock (Linux >= 5.13 with it enabled)")
    libc = _libc()
    handled = _handled_fs(abi)
    net = _NET_BIND_TCP | _NET_CONNECT_TCP if ports is not None and abi >= 4 else 0
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    # struct landlock_ruleset_attr: handled_access_fs, handled_access_net (ABI 4), scoped (ABI 6).
    if abi >= 6:
        attr = struct.pack("=QQQ", handled, net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", handled, net)
    else:
        attr = struct.pack("=Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _check(
        libc.syscall(_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), 0), "landlock ruleset"
    )
    try:
        for path, rights in [*rules, *((p, handled) for p in write_paths)]:
            _add_path_rule(libc, ruleset, path, rights, handled)
        for port in (ports or ()) if net else ():
            rule = ctypes.create_string_buffer(struct.pack("=QQ", _NET_CONNECT_TCP, port), 16)
            _check(libc.syscall(_ADD_RULE, ruleset, _RULE_NET_PORT, rule, 0), "landlock port")
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(libc.syscall(_RESTRICT_SELF, ruleset, 0), "landlock restrict_self")
    finally:
        os.close(ruleset)
    if ports is None:
        return f"landlock ABI {abi}"
    if net:
        return f"landlock ABI {abi} (TCP connect only to ports {', '.join(map(str, ports))})"
    return f"landlock ABI {abi} (network open: TCP rules need ABI 4)"


def confine(
    read_paths: Sequence[str],
    write_paths: Sequence[str],
    hidden: Sequence[str],
    ports: Sequence[int] | None = None,
) -> str:
    """Namespaces, then Landlock: the whole sandbox of one worker (see the module docstring).

    Args:
        read_paths: What the worker may read (hidden paths carved out of it).
        write_paths: Its own folder(s).
        hidden: Paths it must not read even where they lie under a readable one.
        ports: The declared endpoints' TCP ports; None: no network at all.

    Returns:
        The mode recorded per candidate, e.g. "landlock ABI 7 + ipc/net namespaces".

    Raises:
        SandboxUnavailable: a part could not be set up (the worker then refuses to serve).
    """
    namespaces = enter_namespaces(network=ports is not None)
    landlock = restrict(read_rules(read_paths, hidden), write_paths, ports)
    return f"{landlock} + {namespaces}"


# ------------------------------------------------------------------------------------------------
# The probe: what the confined worker can actually read of the harness's secrets.

_PROBE_FILES_PER_FOLDER = 50


def _readable_file(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            handle.read(1)
    except OSError:
        return False
    return True


def _folder_reachable(path: str) -> bool:
    tried = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            if _readable_file(os.path.join(folder, name)):
                return True
            tried += 1
            if tried >= _PROBE_FILES_PER_FOLDER:
                return False
    return False


def reachable(paths: Iterable[str]) -> list[str]:
    """The paths whose contents this process can read (a folder: any of its first files)."""
    found: list[str] = []
    for path in paths:
        ok = _folder_reachable(path) if os.path.isdir(path) else _readable_file(path)
        if ok:
            found.append(path)
    return found


_SCAN_LIMIT = 20_000


def files_starting_with(roots: Iterable[str], prefixes: Sequence[str]) -> list[str]:
    """Readable files under `roots` whose text starts with one of `prefixes` (e.g. a key's).

    The harness knows where its own secrets are, not where a user left a copy: a held-out key
    saved beside the candidate's module is found here (the first 20,000 files of each root).
    """
    if not prefixes:
        return []
    marks = tuple(p.encode() for p in prefixes)
    width = max(len(m) for m in marks)
    found: list[str] = []
    for root in roots:
        for count, (folder, _dirs, files) in enumerate(os.walk(root)):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    with open(path, "rb") as handle:
                        head = handle.read(width)
                except OSError:
                    continue
                if head.startswith(marks):
                    found.append(path)
            if count > _SCAN_LIMIT:
                break
    return found


# ------------------------------------------------------------------------------------------------
# The explicit fallback for tests: a Python audit hook refusing file access.
#
# `sys.addaudithook` hooks cannot be removed from Python, and every `open`, directory listing,
# `os.chdir` and `subprocess` start passes through them. Native code (ctypes, a C extension)
# bypasses it, so it is used only where asked for, and its mode says so.

AUDIT_HOOK_MODE = "python audit hook (bypassable by native code)"
"""The fallback's name, as recorded per candidate."""

_PATH_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "os.chdir", "os.walk", "glob.glob"})
_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn"})


def install_audit_hook(rules: Sequence[tuple[str, int]], write_paths: Iterable[str]) -> str:
    """Refuse, from now on, any file access outside the given paths and any new process."""
    writable = tuple(os.path.realpath(p) for p in write_paths)
    readable = tuple(os.path.realpath(p) for p, rights in rules if rights & READ_FILE) + writable
    listable = tuple(os.path.realpath(p) for p, _rights in rules) + writable

    def inside(path: Any, allowed: tuple[str, ...]) -> bool:
        if isinstance(path, int):  # an already-open descriptor (os.scandir(fd), fdopen)
            return True
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in allowed)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in _PROCESS_EVENTS:
            raise PermissionError(f"the candidate sandbox refuses {event}")
        if event not in _PATH_EVENTS or not args or args[0] is None:
            return
        if not inside(args[0], readable if event == "open" else listable):
            raise PermissionError(f"the candidate sandbox refuses {event} of {args[0]!r}")

    sys.addaudithook(hook)
    return AUDIT_HOOK_MODE
