"""A filesystem sandbox for the adapter worker: Linux Landlock through raw system calls.

Why Landlock: it needs no privilege, no setuid helper and no package (bubblewrap needs user
namespaces, which many containers and CI runners refuse); any Linux kernel since 5.13 has it,
and once a process restricts itself the restriction cannot be lifted, by it or any child. The
rules are an allow-list: the worker may read the interpreter, its libraries and the adapter's
own module folder, and read and write its own empty folder; everything else (the corpus, the
harness cache, the run folder, the user's home) is refused by the kernel with EACCES.

Where Landlock is missing (another OS, an old kernel, a seccomp profile that blocks the calls)
`restrict` says so and the worker falls back to a Python audit hook (`_audit_hook.py`), which
refuses the same opens but can be bypassed by native code: the mode is recorded per candidate.

The constants are the kernel's uapi (`include/uapi/linux/landlock.h`); the system call numbers
444-446 are the same on every architecture that has them.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from collections.abc import Iterable

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ABI1_ALL = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | _TRUNCATE | _IOCTL_DEV
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
"""Rights of a read-only path (execute included: shared libraries are mapped executable)."""


class SandboxUnavailable(Exception):
    """Landlock cannot be applied here (the message says why)."""


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


def _handled(abi: int) -> int:
    handled = _ABI1_ALL
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    if abi >= 5:
        handled |= _IOCTL_DEV
    return handled


def _check(value: int, what: str) -> int:
    if value < 0:
        errno = ctypes.get_errno()
        raise SandboxUnavailable(f"landlock {what} failed: {os.strerror(errno)}")
    return value


def restrict(read_paths: Iterable[str], write_paths: Iterable[str]) -> str:
    """Restrict this process (and its future children) to the given paths, for good.

    Args:
        read_paths: Files or folders the process may read (missing ones are skipped).
        write_paths: Folders it may read, write, create and delete in.

    Returns:
        The mode, e.g. "landlock ABI 7" (recorded per candidate).

    Raises:
        SandboxUnavailable: Landlock is missing or refused; nothing was restricted.
    """
    abi = abi_version()
    if abi < 1:
        raise SandboxUnavailable("this kernel has no Landlock (Linux >= 5.13 with it enabled)")
    libc = _libc()
    handled = _handled(abi)
    # struct landlock_ruleset_attr: handled_access_fs, handled_access_net (ABI 4), scoped (ABI 6).
    # The network is not restricted (a user adapter may call its own model's API); signals and
    # abstract unix sockets outside the sandbox are, where the ABI can.
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", handled, 0, scoped) if abi >= 6 else struct.pack("=Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    size = ctypes.c_size_t(len(attr))
    ruleset = _check(libc.syscall(_CREATE_RULESET, buffer, size, 0), "ruleset")
    try:
        rules = [(p, READ) for p in read_paths] + [(p, handled) for p in write_paths]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path that does not exist grants nothing
            try:
                allowed = rights & handled
                if not os.path.isdir(path):
                    allowed &= _FILE_RIGHTS
                rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, fd), 12)
                _check(libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0), "add_rule")
            finally:
                os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(libc.syscall(_RESTRICT_SELF, ruleset, 0), "restrict_self")
    finally:
        os.close(ruleset)
    return f"landlock ABI {abi}"
