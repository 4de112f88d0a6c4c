"""The cell kernel's seccomp filter: an allow-list of system calls, as a classic BPF program.

The kernel process (and everything it starts) runs under :func:`program`: bubblewrap loads it (``--seccomp FD``)
before ``setpriv`` and Python start, and the worker stacks the same list without ``execve`` on itself once it is up
(``isolation.isolate``), so a cell can never run another program. What a call meets:

- **allowed** (``ALLOWED``): what CPython, numpy, PIL and the allowed packages need to run (files, memory, time,
  signals, the process's own threads and forks, pipes, polling, Landlock) and nothing that reaches state outside
  the process's own namespaces;
- **allowed with its arguments checked**: ``socket``/``socketpair`` only for AF_UNIX, AF_INET and AF_INET6
  (AF_NETLINK, AF_PACKET, AF_VSOCK and every other family get ``EAFNOSUPPORT``); ``clone`` only without a
  namespace flag (``CLONE_NEWUSER``, ``CLONE_NEWNET``, ...; else ``EPERM``); ``prctl`` except ``PR_SET_PTRACER``
  and ``PR_SET_DUMPABLE`` other than 0 (a kernel that made itself undumpable stays so); ``clone3``, whose flags
  a filter cannot read, answers ``ENOSYS`` so the C library falls back to ``clone``;
- **refused with ``EPERM``** (``REFUSED``, named so the refusal is clear): namespaces (``unshare``, ``setns``),
  mounts, keyrings (``add_key``, ``request_key``, ``keyctl``), ``memfd_create`` and ``memfd_secret`` (memory
  outside ``RLIMIT_AS``), SysV IPC and POSIX message queues, io_uring, Linux AIO, ``userfaultfd``, ``ptrace``,
  ``process_vm_readv``/``writev``, ``pidfd_getfd``, ``kcmp``, ``bpf``, ``perf_event_open``, kexec and modules,
  ``mlock``, NUMA policy, fanotify, file handles, extended-attribute writes, ``execveat``;
- **everything else** answers ``ENOSYS`` (a call this list does not know, as an older Linux would).

A call made for another architecture's ABI (32-bit x86, x32) kills the process. Architectures: x86_64 and aarch64
(the tables below hold both numbers); elsewhere :func:`machine` is None and the sandbox refuses to start.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import struct

# name, number on x86_64, number on aarch64 ("-": the call does not exist there)
ALLOWED = """
    read 0 63, write 1 64, open 2 -, close 3 57, stat 4 -, fstat 5 80, lstat 6 -, poll 7 -, lseek 8 62, mmap 9 222
    mprotect 10 226, munmap 11 215, brk 12 214, rt_sigaction 13 134, rt_sigprocmask 14 135, rt_sigreturn 15 139
    ioctl 16 29, pread64 17 67, pwrite64 18 68, readv 19 65, writev 20 66, access 21 -, pipe 22 -, select 23 -
    sched_yield 24 124, mremap 25 216, msync 26 227, mincore 27 232, madvise 28 233, dup 32 23, dup2 33 -, pause 34 -
    nanosleep 35 101, getitimer 36 102, alarm 37 -, setitimer 38 103, getpid 39 172, sendfile 40 71, socket 41 198
    connect 42 203, accept 43 202, sendto 44 206, recvfrom 45 207, sendmsg 46 211, recvmsg 47 212, shutdown 48 210
    bind 49 200, listen 50 201, getsockname 51 204, getpeername 52 205, socketpair 53 199, setsockopt 54 208
    getsockopt 55 209, clone 56 220, fork 57 -, vfork 58 -, execve 59 221, exit 60 93, wait4 61 260, kill 62 129
    uname 63 160, fcntl 72 25, flock 73 32, fsync 74 82, fdatasync 75 83, truncate 76 45, ftruncate 77 46
    getdents 78 -, getcwd 79 17, chdir 80 49, fchdir 81 50, rename 82 -, mkdir 83 -, rmdir 84 -, creat 85 -
    link 86 -, unlink 87 -, symlink 88 -, readlink 89 -, chmod 90 -, fchmod 91 52, chown 92 -, fchown 93 55
    lchown 94 -, umask 95 166, gettimeofday 96 169, getrlimit 97 163, getrusage 98 165, sysinfo 99 179, times 100 153
    getuid 102 174, getgid 104 176, setuid 105 146, setgid 106 144, geteuid 107 175, getegid 108 177, setpgid 109 154
    getppid 110 173, getpgrp 111 -, setsid 112 157, setreuid 113 145, setregid 114 143, getgroups 115 158
    setgroups 116 159, setresuid 117 147, getresuid 118 148, setresgid 119 149, getresgid 120 150, getpgid 121 155
    setfsuid 122 151, setfsgid 123 152, getsid 124 156, capget 125 90, capset 126 91, rt_sigpending 127 136
    rt_sigtimedwait 128 137, rt_sigqueueinfo 129 138, rt_sigsuspend 130 133, sigaltstack 131 132, utime 132 -
    mknod 133 -, statfs 137 43, fstatfs 138 44, getpriority 140 141, setpriority 141 140, sched_setparam 142 118
    sched_getparam 143 121, sched_setscheduler 144 119, sched_getscheduler 145 120, sched_get_priority_max 146 125
    sched_get_priority_min 147 126, sched_rr_get_interval 148 127, prctl 157 167, arch_prctl 158 -, setrlimit 160 164
    gettid 186 178, readahead 187 213, getxattr 191 8, lgetxattr 192 9, fgetxattr 193 10, listxattr 194 11
    llistxattr 195 12, flistxattr 196 13, tkill 200 130, time 201 -, futex 202 98, sched_setaffinity 203 122
    sched_getaffinity 204 123, epoll_create 213 -, getdents64 217 61, set_tid_address 218 96, restart_syscall 219 128
    fadvise64 221 223, timer_create 222 107, timer_settime 223 110, timer_gettime 224 108, timer_getoverrun 225 109
    timer_delete 226 111, clock_gettime 228 113, clock_getres 229 114, clock_nanosleep 230 115, exit_group 231 94
    epoll_wait 232 -, epoll_ctl 233 21, tgkill 234 131, utimes 235 -, get_mempolicy 239 236, waitid 247 95
    inotify_init 253 -, inotify_add_watch 254 27, inotify_rm_watch 255 28, openat 257 56, mkdirat 258 34
    mknodat 259 33, fchownat 260 54, futimesat 261 -, newfstatat 262 79, unlinkat 263 35, renameat 264 38
    linkat 265 37, symlinkat 266 36, readlinkat 267 78, fchmodat 268 53, faccessat 269 48, pselect6 270 72
    ppoll 271 73, set_robust_list 273 99, get_robust_list 274 100, splice 275 76, tee 276 77, sync_file_range 277 84
    vmsplice 278 75, utimensat 280 88, epoll_pwait 281 22, signalfd 282 -, timerfd_create 283 85, eventfd 284 -
    fallocate 285 47, timerfd_settime 286 86, timerfd_gettime 287 87, accept4 288 242, signalfd4 289 74
    eventfd2 290 19, epoll_create1 291 20, dup3 292 24, pipe2 293 59, inotify_init1 294 26, preadv 295 69
    pwritev 296 70, rt_tgsigqueueinfo 297 240, recvmmsg 299 243, prlimit64 302 261, sendmmsg 307 269, getcpu 309 168
    sched_setattr 314 274, sched_getattr 315 275, renameat2 316 276, seccomp 317 277, getrandom 318 278
    membarrier 324 283, copy_file_range 326 285, preadv2 327 286, pwritev2 328 287, statx 332 291, rseq 334 293
    pidfd_send_signal 424 424, pidfd_open 434 434, clone3 435 435, close_range 436 436, faccessat2 439 439
    epoll_pwait2 441 441, landlock_create_ruleset 444 444, landlock_add_rule 445 445, landlock_restrict_self 446 446
    futex_waitv 449 449, cachestat 451 451, fchmodat2 452 452, map_shadow_stack 453 453, futex_wake 454 454
    futex_wait 455 455, futex_requeue 456 456, mseal 462 462
"""
REFUSED = """
    shmget 29 194, shmat 30 196, shmctl 31 195, semget 64 190, semop 65 193, semctl 66 191, shmdt 67 197
    msgget 68 186, msgsnd 69 189, msgrcv 70 188, msgctl 71 187, ptrace 101 117, mlock 149 228, munlock 150 229
    mlockall 151 230, munlockall 152 231, pivot_root 155 41, chroot 161 51, mount 165 40, umount2 166 39
    init_module 175 105, delete_module 176 106, setxattr 188 5, lsetxattr 189 6, fsetxattr 190 7, removexattr 197 14
    lremovexattr 198 15, fremovexattr 199 16, io_setup 206 0, io_destroy 207 1, io_getevents 208 4, io_submit 209 2
    io_cancel 210 3, semtimedop 220 192, mbind 237 235, set_mempolicy 238 237, mq_open 240 180, mq_unlink 241 181
    mq_timedsend 242 182, mq_timedreceive 243 183, mq_notify 244 184, mq_getsetattr 245 185, kexec_load 246 104
    add_key 248 217, request_key 249 218, keyctl 250 219, migrate_pages 256 238, unshare 272 97, move_pages 279 239
    perf_event_open 298 241, fanotify_init 300 262, fanotify_mark 301 263, name_to_handle_at 303 264
    open_by_handle_at 304 265, setns 308 268, process_vm_readv 310 270, process_vm_writev 311 271, kcmp 312 272
    finit_module 313 273, memfd_create 319 279, kexec_file_load 320 294, bpf 321 280, execveat 322 281
    userfaultfd 323 282, mlock2 325 284, io_pgetevents 333 292, io_uring_setup 425 425, io_uring_enter 426 426
    io_uring_register 427 427, open_tree 428 428, move_mount 429 429, fsopen 430 430, fsconfig 431 431
    fsmount 432 432, fspick 433 433, pidfd_getfd 438 438, process_madvise 440 440, mount_setattr 442 442
    memfd_secret 447 447
"""
ARCHES = {"x86_64": (0xC000003E, 1), "aarch64": (0xC00000B7, 2)}   # AUDIT_ARCH_*, column in the tables
ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}
SOCKET_FAMILIES = (1, 2, 10)              # AF_UNIX, AF_INET, AF_INET6
CLONE_NAMESPACES = 0x7E020000             # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
PR_SET_DUMPABLE, PR_SET_PTRACER, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 4, 0x59616D61, 38, 22
X32_BIT = 0x40000000

_LD_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_KILL_PROCESS, _ALLOW, _ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
_NR, _ARCH = 0, 4


def _arg(i: int, high: bool = False) -> int:
    """Offset of argument ``i``'s low (or high) 32 bits in ``struct seccomp_data`` (little endian)."""
    return 16 + 8 * i + (4 if high else 0)


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _fail(number: int) -> bytes:
    return _op(_RET, _ERRNO | number)


def _table(text: str, column: int) -> dict[str, int]:
    out = {}
    for cell in text.replace("\n", ",").split(","):
        if cell.strip():
            fields = cell.split()
            if fields[column] != "-":
                out[fields[0]] = int(fields[column])
    return out


def machine() -> str | None:
    """The architecture name this filter has tables for (``x86_64`` | ``aarch64``), or None."""
    name = platform.machine().lower()
    name = ALIASES.get(name, name)
    return name if name in ARCHES else None


def _block(name: str) -> list[bytes]:
    """The instructions run for one allowed call, after its number matched (each ends in a return)."""
    allow = _op(_RET, _ALLOW)
    if name in ("socket", "socketpair"):
        n = len(SOCKET_FAMILIES)
        return [_op(_LD_ABS, _arg(0)), *(_op(_JEQ, fam, n - j, 0) for j, fam in enumerate(SOCKET_FAMILIES)),
                _fail(errno.EAFNOSUPPORT), allow]
    if name == "clone":
        return [_op(_LD_ABS, _arg(0)), _op(_JSET, CLONE_NAMESPACES, 0, 1), _fail(errno.EPERM), allow]
    if name == "prctl":
        return [_op(_LD_ABS, _arg(0)), _op(_JEQ, PR_SET_PTRACER, 5, 0), _op(_JEQ, PR_SET_DUMPABLE, 0, 5),
                _op(_LD_ABS, _arg(1)), _op(_JEQ, 0, 0, 2), _op(_LD_ABS, _arg(1, high=True)), _op(_JEQ, 0, 1, 0),
                _fail(errno.EPERM), allow]
    if name == "clone3":
        return [_fail(errno.ENOSYS)]
    return [allow]


def numbers(arch: str | None = None) -> dict[str, int]:
    """System call name -> number on ``arch`` (default: this machine) for every call the tables name."""
    column = ARCHES[arch or machine()][1]
    return _table(ALLOWED, column) | _table(REFUSED, column)


@functools.lru_cache(maxsize=8)
def program(arch: str | None = None, *, exec_allowed: bool = True) -> bytes:
    """The filter as ``struct sock_filter`` bytes (what ``bwrap --seccomp`` reads and ``PR_SET_SECCOMP`` takes).
    ``exec_allowed``: whether ``execve`` is on the list (bubblewrap's filter must let ``setpriv`` start Python;
    the one the worker adds refuses it). Raises ValueError for an architecture without a table."""
    arch = arch or machine()
    if arch not in ARCHES:
        raise ValueError(f"the kernel's seccomp filter has system call tables for {', '.join(ARCHES)} only, "
                         f"not {arch or platform.machine()!r}")
    audit, column = ARCHES[arch]
    allowed, refused = _table(ALLOWED, column), _table(REFUSED, column)
    if not exec_allowed:
        refused["execve"] = allowed.pop("execve")
    prog = [_op(_LD_ABS, _ARCH), _op(_JEQ, audit, 1, 0), _op(_RET, _KILL_PROCESS), _op(_LD_ABS, _NR)]
    if arch == "x86_64":
        prog += [_op(_JSET, X32_BIT, 0, 1), _op(_RET, _KILL_PROCESS)]
    for name, number in sorted(allowed.items(), key=lambda item: item[1]):
        block = _block(name)
        prog += [_op(_JEQ, number, 0, len(block)), *block]
    for _name, number in sorted(refused.items(), key=lambda item: item[1]):
        prog += [_op(_JEQ, number, 0, 1), _fail(errno.EPERM)]
    prog.append(_fail(errno.ENOSYS))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(prog: bytes) -> None:
    """Put this process (and what it starts later) under ``prog`` too; filters stack, the strictest answer
    wins. Sets ``no_new_privs`` first. Raises OSError when the Linux kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len(prog) // 8, ctypes.addressof(buf))
    for args in ((PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), (PR_SET_SECCOMP, 2, ctypes.addressof(fprog), 0, 0)):
        if libc.prctl(*(ctypes.c_ulong(a) for a in args)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl({args[0]}): {os.strerror(err)}")


DESCRIPTION = ("seccomp allow-list (no user or other namespaces, keyrings, memfd, SysV IPC, io_uring, AIO, "
               "userfaultfd, ptrace, bpf, perf events or mounts; sockets AF_UNIX/INET/INET6 only)")
