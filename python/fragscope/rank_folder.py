"""The folders the hook writes in, opened so that no other user can redirect, block or read what it writes.

The rank folder (default /dev/shm/fragscope) is shared by every user's jobs on a node and by the
node agent, so anyone may have put anything there. The rules (docs/hook.md, "The rank folder:
where files live, who can write what"):

- A folder owned by this user that nobody else can write is used as it is.
- Any other folder is a shared root: the hook publishes in `<root>/<euid>/`, a subfolder it
  creates or checks (a real directory, not a link, owned by this user, writable by nobody else).
  A missing root is created sticky and world-writable (01777, like /tmp) so every user's job can
  make its own subfolder.
- When the shared root has the set-group-ID bit and belongs to root (or to this user), its group is
  the agent's: the subfolder (02750, in that group) and the rank files (0640) are readable by that
  group. Otherwise they are 0700 and 0600: only this user and root read them. The group of anyone
  else's set-group-ID folder is its owner's choice, not the agent's.

A rank's output folder (`<out>/rank<R>/`: steps.jsonl, the OOM dump) must be this user's and not
writable by others (a project group may write it); the folders the hook creates on its path are 0700, its
files 0600.

Every later operation is relative to the open folder (no path is looked up twice), creates
with O_EXCL, never follows a symbolic link and never opens anything but a regular file without
blocking.
"""

import errno
import os
import stat

from . import notices

SHARED_ROOT_MODE = 0o1777
PRIVATE_FOLDER_MODE = 0o700
GROUP_FOLDER_MODE = stat.S_ISGID | 0o750  # files created in it take the folder's group, the agent's
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEVER_BLOCK_OR_FOLLOW = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


class UntrustedFile(OSError):
    """A file the hook will not use: a link, a special file, too large, or someone else's."""

    def __str__(self):
        return self.strerror  # "is a symbolic link": the caller names the file


class RankFolder:
    """An open folder only this user (and root) can write: a rank folder (open()) or a rank's
    output folder (open_output()). Not thread-safe: one owner."""

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
            trusted_group = info.st_mode & stat.S_ISGID and info.st_uid in (0, os.geteuid())
            path = os.path.join(root, str(os.geteuid()))
            fd, group_readable = _open_own_subfolder(root_fd, path, info.st_gid if trusted_group else None)
            return cls(fd, path, group_readable)
        finally:
            if root_fd is not None:
                os.close(root_fd)

    @classmethod
    def open_output(cls, path: str) -> "RankFolder":
        """Opens a rank's output folder, creating it and its missing parents (0700). Raises OSError
        unless it is this user's and others cannot write it: anyone could plant or swap files there."""
        _make_private_folders(os.path.abspath(path))
        fd = _open_dir(path)
        try:
            info = os.fstat(fd)
            if info.st_uid != os.geteuid():
                raise PermissionError(errno.EPERM, f"is owned by uid {info.st_uid}, not by this user", path)
            if info.st_mode & stat.S_IWOTH:  # its group may write: links, FIFOs, others' files are refused anyway
                raise PermissionError(errno.EPERM, "can be written by anyone (chmod o-w to use it)", path)
            return cls(fd, path, group_readable=False)
        except BaseException:
            os.close(fd)
            raise

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

    def open_append(self, name: str) -> int:
        """`name` opened for appending, created with the folder's file mode when missing. Never blocks
        and never follows a link; raises UntrustedFile for a link, a FIFO or device, someone else's, or a
        file with another name too (a hard link that a member of a group allowed to write the folder made
        to another of this user's files)."""
        fd, info = self._open_regular(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            if info.st_nlink != 1:
                raise UntrustedFile(errno.EMLINK, f"has {info.st_nlink} hard links, not 1", self.join(name))
            if stat.S_IMODE(info.st_mode) != self.file_mode:
                os.fchmod(fd, self.file_mode)  # an older hook's 0644, or what the umask left
            os.set_blocking(fd, True)
            return fd
        except BaseException:
            os.close(fd)
            raise

    def rename(self, source: str, target: str) -> None:
        os.rename(source, target, src_dir_fd=self._fd, dst_dir_fd=self._fd)

    def remove(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self._fd)
        except FileNotFoundError:
            pass

    def remove_unless_replaced(self, name: str, created) -> bool:
        """Removes `name` unless it is now another file than the one `created` ((st_dev, st_ino)) names; False
        when it is. A file renamed to `name` between the lstat and the unlink is still removed: a race of
        microseconds, accepted (only a process of the same rank and pid in another PID namespace can lose)."""
        info = self.lstat(name)
        if info is not None and (info.st_dev, info.st_ino) != created:
            return False
        self.remove(name)
        return True

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
        fd, info = self._open_regular(name, os.O_RDONLY)
        try:
            if info.st_size > limit:
                raise UntrustedFile(errno.EFBIG, f"has {info.st_size} bytes (at most {limit} are read)",
                                    self.join(name))
            return os.read(fd, limit + 1)[:limit]
        finally:
            os.close(fd)

    def _open_regular(self, name: str, flags: int):
        """(fd, fstat) of `name` opened with `flags`, if it is a regular file owned by this user or root."""
        path = self.join(name)
        try:
            fd = os.open(name, flags | _NEVER_BLOCK_OR_FOLLOW, self.file_mode, dir_fd=self._fd)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UntrustedFile(errno.ELOOP, "is a symbolic link", path) from None
            if error.errno in (errno.ENXIO, errno.ENODEV, errno.EWOULDBLOCK):  # a FIFO no one reads, a device
                raise UntrustedFile(error.errno, "is not a regular file", path) from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UntrustedFile(errno.EINVAL, "is not a regular file", path)
            if info.st_uid not in (os.geteuid(), 0):
                raise UntrustedFile(errno.EPERM, f"is owned by uid {info.st_uid}, not by this user or root", path)
            return fd, info
        except BaseException:
            os.close(fd)
            raise

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


def _open_own_subfolder(root_fd: int, path: str, agent_group):
    """(fd, group-readable) of this user's subfolder of the shared root, created when missing; readable
    by `agent_group` (None: by no group) where that can be arranged, else private."""
    name = os.path.basename(path)
    try:
        # In a set-group-ID root it takes the root's group and bit; the umask may take the group's access.
        os.mkdir(name, PRIVATE_FOLDER_MODE if agent_group is None else 0o750, dir_fd=root_fd)
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
        if agent_group is not None and _share_with_group(fd, info, agent_group, path):
            return fd, True
        os.fchmod(fd, PRIVATE_FOLDER_MODE)  # only this user adds, removes or lists files; no set-group-ID bit
        return fd, False
    except BaseException:
        os.close(fd)
        raise


def _share_with_group(fd: int, info, group: int, path: str) -> bool:
    """Makes the subfolder GROUP_FOLDER_MODE in `group`; False, with a notice, where it cannot be."""
    if info.st_gid == group and stat.S_IMODE(info.st_mode) != GROUP_FOLDER_MODE:
        os.fchmod(fd, GROUP_FOLDER_MODE)  # the kernel keeps the set-group-ID bit for root or a member only
        info = os.fstat(fd)
    if info.st_gid == group and stat.S_IMODE(info.st_mode) == GROUP_FOLDER_MODE:
        return True
    if info.st_gid != group:
        reason = f"its group is {info.st_gid}, not the agent's ({group}); remove it to have it made again"
    else:
        reason = (f"only root or a member of the agent's group ({group}) can give that group the access "
                  "the umask took (umask 027 or 022 keeps it)")
    notices.warn("rank-group:" + path, f"rank files private: {path}: {reason}")
    return False


def _make_private_folders(path: str) -> None:
    """Creates the absolute `path` and its missing parents 0700 (os.makedirs gives parents the umask's mode)."""
    parent = os.path.dirname(path)
    if parent != path and not os.path.isdir(parent):
        _make_private_folders(parent)
    try:
        os.mkdir(path, PRIVATE_FOLDER_MODE)
    except FileExistsError:
        pass


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
