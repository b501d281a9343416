"""The folder a rank file is published in, opened so that no other user can redirect, block or read it.

The rank folder (default /dev/shm/fragscope) is shared by every user's jobs on a node and by the
node agent, so anyone may have put anything there. The rules (docs/hook.md, "The rank folder:
where files live, who can write what"):

- A folder owned by this user that nobody else can write is used as it is.
- Any other folder is a shared root: the hook publishes in `<root>/<euid>/`, a subfolder it
  creates or checks (a real directory, not a link, owned by this user, writable by nobody else).
  A missing root is created sticky and world-writable (01777, like /tmp) so every user's job can
  make its own subfolder.
- When the shared root has the set-group-ID bit, its group is the agent's: the subfolder
  (0750, inheriting the group) and the rank files (0640) are readable by that group. Otherwise
  they are 0700 and 0600: only this user and root read them.
- Every later operation is relative to the open subfolder (no path is looked up twice), creates
  with O_EXCL, never follows a symbolic link and never opens anything but a regular file without
  blocking.
"""

import errno
import os
import stat

SHARED_ROOT_MODE = 0o1777
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_SMALL_FILE = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


class UntrustedFile(Exception):
    """A file the hook will not read: a link, a special file, too large, or someone else's."""


class RankFolder:
    """An open folder only this user (and root) can write. Not thread-safe: one owner."""

    def __init__(self, fd: int, path: str, group_readable: bool):
        self._fd = fd
        self.path = path
        self.group_readable = group_readable  # the shared root's group (the agent's) may read
        self.file_mode = 0o640 if group_readable else 0o600

    @classmethod
    def open(cls, root: str) -> "RankFolder":
        """Opens the folder to publish in under `root`; raises OSError naming the problem."""
        root_fd = _open_or_create_root(root)
        try:
            info = os.fstat(root_fd)
            if info.st_uid == os.geteuid() and not info.st_mode & 0o022:
                fd, root_fd = root_fd, None
                return cls(fd, root, group_readable=False)
            group_readable = bool(info.st_mode & stat.S_ISGID)
            path = os.path.join(root, str(os.geteuid()))
            return cls(_open_own_subfolder(root_fd, path, group_readable), path, group_readable)
        finally:
            if root_fd is not None:
                os.close(root_fd)

    def join(self, name: str) -> str:
        return os.path.join(self.path, name)

    def create_exclusive(self, name: str) -> int:
        """A new file `name` with the folder's file mode; a leftover of that name is replaced."""
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, self.file_mode, dir_fd=self._fd)
        except FileExistsError:  # a crashed writer's, or planted: only this user or root could have
            os.unlink(name, dir_fd=self._fd)
            fd = os.open(name, flags, self.file_mode, dir_fd=self._fd)
        os.fchmod(fd, self.file_mode)  # whatever the umask took away or left
        return fd

    def rename(self, source: str, target: str) -> None:
        os.rename(source, target, src_dir_fd=self._fd, dst_dir_fd=self._fd)

    def remove(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self._fd)
        except FileNotFoundError:
            pass

    def lstat(self, name: str):
        """The entry's own status (a link is not followed); None when absent."""
        try:
            return os.stat(name, dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def read_small_file(self, name: str, limit: int) -> bytes:
        """The whole content of a regular file of at most `limit` bytes owned by this user or root.

        Never blocks (O_NONBLOCK: a FIFO or device opens at once and is refused) and never
        follows a link; raises UntrustedFile for anything else, FileNotFoundError when absent."""
        try:
            fd = os.open(name, _OPEN_SMALL_FILE, dir_fd=self._fd)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UntrustedFile("is a symbolic link") from None
            if error.errno in (errno.ENXIO, errno.ENODEV, errno.EWOULDBLOCK):
                raise UntrustedFile("is not a regular file") from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UntrustedFile("is not a regular file")
            if info.st_uid not in (os.geteuid(), 0):
                raise UntrustedFile(f"is owned by uid {info.st_uid}, not by this user or root")
            if info.st_size > limit:
                raise UntrustedFile(f"has {info.st_size} bytes (at most {limit} are read)")
            return os.read(fd, limit + 1)[:limit]
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _open_or_create_root(root: str) -> int:
    try:
        return _open_dir(root)
    except FileNotFoundError:
        pass
    parent = os.path.dirname(os.path.abspath(root))
    os.makedirs(parent, exist_ok=True)
    try:
        os.mkdir(root, 0o700)  # private until it is ours and opened, then opened up
    except FileExistsError:  # another job made it first
        return _open_dir(root)
    fd = _open_dir(root)
    if os.fstat(fd).st_uid == os.geteuid():
        os.fchmod(fd, SHARED_ROOT_MODE)
    return fd


def _open_own_subfolder(root_fd: int, path: str, group_readable: bool) -> int:
    name = os.path.basename(path)
    want = 0o750 if group_readable else 0o700
    try:
        os.mkdir(name, want, dir_fd=root_fd)  # inherits the root's group when it is set-group-ID
    except FileExistsError:
        pass
    except PermissionError:
        raise PermissionError(errno.EACCES, "cannot create a subfolder there (the folder is not writable by "
                                            "this user; make it sticky and world-writable: chmod 1777)",
                              os.path.dirname(path)) from None
    fd = _open_dir(name, dir_fd=root_fd, shown_as=path)
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise PermissionError(errno.EPERM, f"is owned by uid {info.st_uid}, not by this user", path)
        if stat.S_IMODE(info.st_mode) & ~want & 0o777:
            os.fchmod(fd, want)  # no one else may add, remove or (without the agent's group) list files
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_dir(path: str, dir_fd=None, shown_as=None) -> int:
    try:
        return os.open(path, _OPEN_DIR, dir_fd=dir_fd)
    except OSError as error:
        shown = shown_as or path
        if error.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "is a symbolic link (not followed)", shown) from None
        if error.errno == errno.ENOTDIR:
            raise NotADirectoryError(errno.ENOTDIR, "is not a folder (or a path above it is a file)", shown) from None
        raise
