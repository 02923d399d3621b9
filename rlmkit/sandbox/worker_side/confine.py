"""Worker side: OS confinement for the REPL worker, applied by the worker to itself before any
model code runs (the fork server uses only ``die_with_parent``).

Standard library only (the worker runs under ``python -I -S``). Every step is optional: it
either works or reports why not, and the worker lists what is active (``protections``).
Layers, strongest first where they overlap:

- namespaces: a new network namespace (no interface but a downed loopback: no network at all)
  and a new mount namespace whose working dir is a size-capped tmpfs (the disk cannot fill).
  As root directly; otherwise inside a new user namespace.
- uid: as root the worker becomes an unprivileged uid of its own (``1_000_000 + pid``): it loses
  every capability, cannot signal or ptrace the host or another worker, and cannot read
  root-only files. ``RLIMIT_NPROC`` then counts exactly this worker's processes.
- landlock: the filesystem shrinks to the working dir (read-write) and the Python installation
  plus shared libraries (read-only); TCP bind/connect is denied; signals and abstract unix
  sockets are scoped to the worker itself (ABI >= 6).
- seccomp: no new processes (fork, vfork, clone without CLONE_THREAD), no exec, no new
  namespaces or mounts, and (network off) no sockets at all.
- rlimits: address space, file size, no core dumps, processes.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import struct
import sys

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET, CLONE_THREAD = 0x20000, 0x10000000, 0x40000000, 0x10000
MS_NOSUID, MS_NODEV, MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 1, 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 1, 38, 22
NR = {  # x86_64 syscall numbers
    "clone": 56,
    "fork": 57,
    "vfork": 58,
    "execve": 59,
    "execveat": 322,
    "clone3": 435,
    "socket": 41,
    "socketpair": 53,
    "ptrace": 101,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "unshare": 272,
    "setns": 308,
    "bpf": 321,
    "userfaultfd": 323,
    "perf_event_open": 298,
    "io_uring_setup": 425,
    "kexec_load": 246,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "init_module": 175,
    "finit_module": 313,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "landlock_create_ruleset": 444,
    "landlock_add_rule": 445,
    "landlock_restrict_self": 446,
}


class StepFailed(Exception):
    """A confinement step is unavailable here; the worker goes on without it."""


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise StepFailed(f"{what}: {os.strerror(err)}")
    return ret


def _syscall(name: str, *args) -> int:
    return _check(_libc.syscall(ctypes.c_long(NR[name]), *args), name)


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s):
        return s.encode() if s is not None else None

    _check(
        _libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}"
    )


# ---------------------------------------------------------------- namespaces
def enter_namespaces(net: bool, mounts: bool) -> None:
    """New network and/or mount namespace (via a user namespace when not root)."""
    flags = (CLONE_NEWNET if net else 0) | (CLONE_NEWNS if mounts else 0)
    if not flags:
        return
    if os.geteuid() == 0:
        _check(_libc.unshare(flags), "unshare")
        return
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(flags | CLONE_NEWUSER), "unshare(user)")
    # Map our own ids so files keep their owner; setgroups must be denied first.
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


def private_workdir(path: str, size_bytes: int | None, owner: int | None) -> None:
    """Mount a size-capped tmpfs on the working dir, visible to this worker only."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    opts = "mode=0700" + (f",size={size_bytes}" if size_bytes else "")
    if owner is not None:
        opts += f",uid={owner},gid={owner}"
    _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, opts)
    os.chdir(path)  # the old cwd is the directory underneath the new mount


def _blocked_ancestor(path: str) -> str | None:
    """The highest ancestor of ``path`` that 'other' users cannot traverse, if any."""
    parts = os.path.abspath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        anc = os.sep.join(parts[:i]) or os.sep
        if not os.stat(anc).st_mode & 0o001:
            return anc
    return None


def expose_to_other_users(paths: list[str]) -> None:
    """Make ``paths`` reachable for an unprivileged uid without opening what surrounds them.

    If the Python installation lives under a private dir (e.g. /root/.pyenv), a tmpfs (0755)
    is mounted over that dir in our private mount namespace (hiding everything in it) and the
    installation is moved back in read-only, via open_tree/move_mount.
    """
    for path in paths:
        anc = _blocked_ancestor(path)
        if anc is None:
            continue
        tree = _syscall(
            "open_tree", -100, path.encode(), 1 | 0o2000000 | 0x8000
        )  # CLONE|CLOEXEC|AT_RECURSIVE
        try:
            _mount("tmpfs", anc, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
            os.makedirs(path, exist_ok=True)
            _syscall("move_mount", tree, b"", -100, path.encode(), 4)  # MOVE_MOUNT_F_EMPTY_PATH
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        finally:
            os.close(tree)


# ---------------------------------------------------------------- identity and limits
def drop_to_uid(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # clears every capability


def die_with_parent(host_pid: int) -> None:
    """SIGKILL when the host dies (set after the uid change, which clears it)."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if os.getppid() != host_pid:
        os._exit(70)


def set_rlimits(memory: int | None, file_bytes: int | None, nproc: int | None) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    if file_bytes:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    if nproc is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


# ---------------------------------------------------------------- landlock
_FS_RO = 1 | 4 | 8  # EXECUTE, READ_FILE, READ_DIR
_FS_FILE_ONLY = 1 | 2 | 4 | (1 << 14) | (1 << 15)  # rights valid on a file rule


def landlock_abi() -> int:
    ret = _libc.syscall(
        ctypes.c_long(NR["landlock_create_ruleset"]), None, ctypes.c_size_t(0), ctypes.c_uint32(1)
    )
    return max(int(ret), 0)


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= 1 << 13  # REFER
    if abi >= 3:
        rights |= 1 << 14  # TRUNCATE
    if abi >= 5:
        rights |= 1 << 15  # IOCTL_DEV
    return rights


def landlock(rw: list[str], ro: list[str], block_tcp: bool) -> int:
    """Restrict this process (and children) to ``rw`` and ``ro``; returns the ABI used."""
    abi = landlock_abi()
    if abi < 1:
        raise StepFailed("landlock not supported by this kernel")
    handled = _fs_rights(abi)
    net = 3 if (block_tcp and abi >= 4) else 0  # BIND_TCP | CONNECT_TCP, no rule allows any port
    scoped = 3 if abi >= 6 else 0  # ABSTRACT_UNIX_SOCKET | SIGNAL
    attr = struct.pack("QQQ", handled, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    buf = ctypes.create_string_buffer(attr[:size], size)
    ruleset = _syscall("landlock_create_ruleset", buf, ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        for paths, rights in ((rw, handled & ~1), (ro, _FS_RO)):  # the working dir may not exec
            for path in paths:
                if not os.path.exists(path):
                    continue
                if not os.path.isdir(path):
                    rights &= _FS_FILE_ONLY
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    rule = ctypes.create_string_buffer(struct.pack("=Qi", rights & handled, fd), 12)
                    _syscall("landlock_add_rule", ruleset, ctypes.c_int(1), rule, ctypes.c_uint32(0))
                finally:
                    os.close(fd)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
        _syscall("landlock_restrict_self", ruleset, ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return abi


# ---------------------------------------------------------------- seccomp
def seccomp(block_processes: bool, block_sockets: bool) -> None:
    """A small BPF filter: EPERM for process creation, exec, namespaces, mounts, (sockets)."""
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        raise StepFailed(f"seccomp filter written for x86_64 only, not {os.uname().machine}")
    eperm, enosys, allow, kill = 0x50000 | 1, 0x50000 | 38, 0x7FFF0000, 0x80000000
    deny = [
        "ptrace",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "unshare",
        "setns",
        "bpf",
        "userfaultfd",
        "perf_event_open",
        "io_uring_setup",
        "kexec_load",
        "keyctl",
        "add_key",
        "request_key",
        "init_module",
        "finit_module",
        "open_tree",
        "move_mount",
        "fsopen",
    ]
    if block_processes:
        deny += ["fork", "vfork", "execve", "execveat"]
    if block_sockets:
        deny += ["socket", "socketpair"]
    # Program layout: header, one JEQ per denied syscall, clone check, then the return table.
    prog: list[tuple[int, int, int, int]] = []
    ret_allow = 4 + len(deny) + (5 if block_processes else 0)  # index of "ret allow"
    ret_eperm, ret_enosys, ret_kill = ret_allow + 1, ret_allow + 2, ret_allow + 3

    def jump_to(target: int) -> int:
        return target - len(prog) - 1

    prog.append((0x20, 0, 0, 4))  # ld arch
    prog.append((0x15, 0, jump_to(ret_kill), 0xC000003E))  # not x86_64: kill
    prog.append((0x20, 0, 0, 0))  # ld nr
    prog.append((0x35, jump_to(ret_eperm), 0, 0x40000000))  # x32 ABI: deny
    for name in deny:
        prog.append((0x15, jump_to(ret_eperm), 0, NR[name]))
    if block_processes:
        prog.append((0x15, jump_to(ret_enosys), 0, NR["clone3"]))  # glibc falls back to clone
        clone_check = len(prog) + 2
        prog.append((0x15, clone_check - len(prog) - 1, 0, NR["clone"]))
        prog.append((0x06, 0, 0, allow))
        prog.append((0x20, 0, 0, 16))  # ld args[0] (low 32 bits: the clone flags)
        prog.append((0x45, jump_to(ret_allow), jump_to(ret_eperm), CLONE_THREAD))  # threads only
    assert len(prog) == ret_allow, (len(prog), ret_allow)
    prog += [(0x06, 0, 0, allow), (0x06, 0, 0, eperm), (0x06, 0, 0, enosys), (0x06, 0, 0, kill)]
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    filt = ctypes.create_string_buffer(raw, len(raw))
    fprog = struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(filt))
    fbuf = ctypes.create_string_buffer(fprog, len(fprog))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _check(_libc.prctl(PR_SET_SECCOMP, 2, fbuf, 0, 0), "prctl(SECCOMP)")
