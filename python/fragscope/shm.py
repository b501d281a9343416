"""The per-rank shared-memory file the node agent reads (layout: docs/rank-file.md).

Standard library only: the agent's tests and the end-to-end test run this writer without torch.
One writer per file; readers never block it (a sequence lock plus a CRC, see the doc).
"""

import contextlib
import ctypes
import dataclasses
import errno
import math
import mmap
import operator
import os
import re
import struct
import threading
import zlib

from .rank_folder import RankFolder

MAGIC = b"FRAGSCOP"
VERSION = 1
SIZE = 512
HEADER = struct.Struct("<8sIIQII")  # magic, version, size, seq, crc32, zero
SEQ_OFFSET = 16
CRC_OFFSET = 24
PAYLOAD_OFFSET = HEADER.size  # 32
PAYLOAD = struct.Struct("<q4i2I" + "19Q" + "q" + "9d" + "64s64s")
assert PAYLOAD_OFFSET + PAYLOAD.size == 424, "layout drifted from docs/rank-file.md"
PAYLOAD_CODES = [code for count, code in re.findall(r"(\d*)([a-zA-Z])", PAYLOAD.format)
                 for _ in range(1 if code == "s" or not count else int(count))]  # one struct code per field
INTEGER_RANGES = {"i": (-2 ** 31, 2 ** 31 - 1), "I": (0, 2 ** 32 - 1),
                  "q": (-2 ** 63, 2 ** 63 - 1), "Q": (0, 2 ** 64 - 1)}

PHASES = {"train": 0, "eval": 1, "checkpoint": 2}
FLAG_LARGEST_FREE_KNOWN = 1
DEFAULT_DIR = "/dev/shm/fragscope"
SUFFIX = ".fsr"
CHECKPOINT_SUFFIX = ".checkpoint"


@dataclasses.dataclass
class RankRecord:
    """One rank's latest state, field for field the layout's payload (docs/rank-file.md)."""
    pid: int = 0
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    gpu: int = -1
    phase: str = "train"
    largest_free_known: bool = False
    update_unix_ns: int = 0
    step_unix_ns: int = 0
    step: int = 0
    allocated_bytes: int = 0
    reserved_bytes: int = 0
    active_bytes: int = 0
    inactive_split_bytes: int = 0
    requested_bytes: int = 0
    largest_free_block_bytes: int = 0
    allocated_peak_bytes: int = 0
    reserved_peak_bytes: int = 0
    device_total_bytes: int = 0
    alloc_retries: int = 0
    ooms: int = 0
    segments: int = 0
    checkpoint_ack: int = 0
    batch_samples: int = 0
    batch_tokens: int = 0
    batch_longest_sequence: int = 0
    loader_queue_depth: int = -1
    step_seconds: float = 0.0
    data_wait_seconds: float = 0.0
    h2d_seconds: float = 0.0
    compute_seconds: float = 0.0
    data_wait_ratio: float = 0.0
    samples_per_second: float = 0.0
    step_seconds_total: float = 0.0
    data_wait_seconds_total: float = 0.0
    hook_seconds_total: float = 0.0
    job: str = ""
    gpu_uuid: str = ""

    def pack(self) -> bytes:
        """The payload bytes [32, 512) of the layout."""
        flags = FLAG_LARGEST_FREE_KNOWN if self.largest_free_known else 0
        fields = (
            self.pid, self.rank, self.local_rank, self.world_size, self.gpu,
            PHASES[self.phase], flags,
            self.update_unix_ns, self.step_unix_ns, self.step,
            self.allocated_bytes, self.reserved_bytes, self.active_bytes,
            self.inactive_split_bytes, self.requested_bytes, self.largest_free_block_bytes,
            self.allocated_peak_bytes, self.reserved_peak_bytes, self.device_total_bytes,
            self.alloc_retries, self.ooms, self.segments, self.checkpoint_ack,
            self.batch_samples, self.batch_tokens, self.batch_longest_sequence,
            self.loader_queue_depth,
            self.step_seconds, self.data_wait_seconds, self.h2d_seconds, self.compute_seconds,
            self.data_wait_ratio, self.samples_per_second, self.step_seconds_total,
            self.data_wait_seconds_total, self.hook_seconds_total,
            _fixed(self.job), _fixed(self.gpu_uuid))
        body = PAYLOAD.pack(*map(_in_range, PAYLOAD_CODES, fields))
        return body + bytes(SIZE - PAYLOAD_OFFSET - len(body))


def _in_range(code: str, value):
    """`value` as a field of struct code `code` holds it: one odd value (a negative token count, a float or a NaN
    given for a count, a string) would otherwise fail the packing, and a rank file that fails to publish is
    withdrawn for the rest of the job. What is no number counts 0."""
    if code == "d":
        return _number(value)
    if code not in INTEGER_RANGES:
        return value
    low, high = INTEGER_RANGES[code]
    with contextlib.suppress(TypeError):
        return min(max(operator.index(value), low), high)  # int, bool, numpy and 0-d tensor integers
    number = _number(value)
    return 0 if math.isnan(number) else math.trunc(min(max(number, low), high))


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0


def _fixed(text: str) -> bytes:
    raw = text.encode("utf-8", "replace")[:64]  # a lone surrogate (undecodable environment bytes) becomes "?"
    return raw.decode("utf-8", "ignore").encode("utf-8")  # never cut a character in half


def rank_file_name(rank: int, pid: int) -> str:
    return f"rank{rank}-pid{pid}{SUFFIX}"


class RankFileWriter:
    """Publishes RankRecords into one rank file under a sequence lock.

    `directory` is the rank folder (rank_folder.py decides where in it the file goes and opens
    it safely). The file appears (atomically, by rename) with the first record; close() removes
    it and its checkpoint flag, in the process that created it only, and only while the name is still
    that file (a process of the same rank and pid in another PID namespace may have replaced it).
    Thread-safe; after creation the recorder's publisher thread alone publishes (and closes), so that a
    stalled rank folder holds up no other thread.
    Raises OSError when the file cannot be created; the caller decides what that means.
    """

    def __init__(self, directory: str, record: RankRecord):
        self._creator_pid = os.getpid()  # a forked child inherits this writer, not the file
        self.folder = RankFolder.open(directory)
        self.name = rank_file_name(record.rank, record.pid)
        self.path = self.folder.join(self.name)
        self.checkpoint_name = self.name + CHECKPOINT_SUFFIX
        self.checkpoint_path = self.path + CHECKPOINT_SUFFIX
        self._map = self._mapped = None
        self._created = None  # (st_dev, st_ino) of the file this writer created
        try:
            self._create(record, self.name + ".tmp")
        except BaseException:
            with contextlib.suppress(OSError):
                self.folder.remove(self.name + ".tmp")
            self.close(remove=False)
            raise

    def _create(self, record, tmp):
        fd = self.folder.create_exclusive(tmp)
        try:
            info = os.fstat(fd)
            self._created = (info.st_dev, info.st_ino)  # the rename below keeps both
            # Real bytes, not a hole: a full /dev/shm fails here, not later with SIGBUS in a store.
            if os.write(fd, bytes(SIZE)) != SIZE:
                raise OSError(errno.ENOSPC, "short write", self.folder.join(tmp))
            self._map = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        # Stores go through ctypes.memmove, which releases the GIL (a slice assignment holds it): a store that
        # faults on a stalled file system then holds up the publishing thread alone, not the training thread.
        self._mapped = ctypes.c_char.from_buffer(self._map)
        HEADER.pack_into(self._map, 0, MAGIC, VERSION, SIZE, 0, 0, 0)
        self._seq = 0
        self._lock = threading.Lock()
        self.publish(record)
        self.folder.rename(tmp, self.name)

    def publish(self, record: RankRecord) -> None:
        payload = record.pack()
        with self._lock, self._updating():
            self._store(PAYLOAD_OFFSET, payload)
            self._store(CRC_OFFSET, struct.pack("<I", zlib.crc32(payload)))

    def _store(self, offset: int, data: bytes) -> None:
        ctypes.memmove(ctypes.addressof(self._mapped) + offset, data, len(data))

    @contextlib.contextmanager
    def _updating(self):
        """Steps 1 and 4 of the update protocol: seq odd while the body is written."""
        self._seq += 1
        self._store(SEQ_OFFSET, struct.pack("<Q", self._seq))
        yield
        self._seq += 1
        self._store(SEQ_OFFSET, struct.pack("<Q", self._seq))

    def close(self, remove: bool = True) -> None:
        if self.folder is None:
            return
        if self._map is not None:
            self._mapped = None  # the map cannot be closed while a pointer into it exists
            self._map.close()
            self._map = None
        if remove and os.getpid() == self._creator_pid:  # a child's exit leaves its parent's file alone
            with contextlib.suppress(OSError):
                # The agent owns the flag file; in this user's folder the user may remove it, with the rank file.
                if self.folder.remove_unless_replaced(self.name, self._created):
                    self.folder.remove(self.checkpoint_name)
        self.folder.close()
        self.folder = None
