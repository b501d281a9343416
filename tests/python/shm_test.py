"""The rank-file writer against the layout table in docs/rank-file.md."""

import os
import re
import struct
import tempfile
import unittest
import zlib

from fragscope import shm

DOC = os.path.join(os.environ.get("FRAGSCOPE_SOURCE_DIR", "."), "docs", "rank-file.md")
FORMATS = {"u32": "<I", "i32": "<i", "u64": "<Q", "i64": "<q", "f64": "<d"}


def documented_fields():
    """(offset, type, name) rows of the layout table."""
    with open(DOC, encoding="utf-8") as f:
        rows = re.findall(r"^\| (\d+) \| ([a-z0-9\[\]]+) \| `(\w+)` \|", f.read(), re.M)
    return [(int(offset), kind, name) for offset, kind, name in rows]


class RankFileWriterTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.record = shm.RankRecord(
            pid=4242, rank=5, local_rank=1, world_size=8, gpu=3, phase="eval", largest_free_known=True,
            update_unix_ns=1_700_000_000_123_456_789, step_unix_ns=1_700_000_000_000_000_001, step=77,
            allocated_bytes=7_692_978_688, reserved_bytes=32_872_857_600, active_bytes=7_692_978_689,
            inactive_split_bytes=2_396_419_584, requested_bytes=7_692_977_412,
            largest_free_block_bytes=1_073_741_824, allocated_peak_bytes=30_983_239_168,
            reserved_peak_bytes=32_872_857_601, device_total_bytes=150_754_820_096, alloc_retries=3,
            ooms=1, segments=516, checkpoint_ack=2, batch_samples=4, batch_tokens=10_336,
            batch_longest_sequence=2584, loader_queue_depth=7, step_seconds=0.5, data_wait_seconds=0.125,
            h2d_seconds=0.001, compute_seconds=0.375, data_wait_ratio=0.25, samples_per_second=8.0,
            step_seconds_total=38.5, data_wait_seconds_total=9.625, hook_seconds_total=0.0125,
            job="llama-sft", gpu_uuid="GPU-0b3c6f5e-1a2b-3c4d-5e6f-000000000001")
        self.writer = shm.RankFileWriter(self.dir.name, self.record)

    def tearDown(self):
        self.writer.close()
        self.dir.cleanup()

    def read(self):
        with open(self.writer.path, "rb") as f:
            return f.read()

    def test_every_documented_field_is_where_the_doc_says(self):
        raw = self.read()
        fields = documented_fields()
        self.assertEqual(len(fields), 43, "the layout table lost or gained rows")
        expected = {"magic": b"FRAGSCOP", "version": 1, "size": 512, "seq": 2,
                    "crc32": zlib.crc32(raw[32:512]), "phase": 1, "flags": 1,
                    "job": b"llama-sft", "gpu_uuid": self.record.gpu_uuid.encode()}
        for offset, kind, name in fields:
            if kind.startswith("char["):
                width = int(kind[5:-1])
                value = raw[offset:offset + width].rstrip(b"\0")
            else:
                value = struct.unpack_from(FORMATS[kind], raw, offset)[0]
            want = expected[name] if name in expected else getattr(self.record, name)
            self.assertEqual(value, want, f"{name} at offset {offset}")

    def test_file_is_exactly_one_record_and_zero_padded(self):
        raw = self.read()
        self.assertEqual(len(raw), shm.SIZE)
        self.assertEqual(raw[424:], bytes(shm.SIZE - 424))

    def test_each_publish_moves_seq_by_two_and_keeps_it_even(self):
        for expected in (4, 6):
            self.record.step += 1
            self.writer.publish(self.record)
            seq = struct.unpack_from("<Q", self.read(), shm.SEQ_OFFSET)[0]
            self.assertEqual(seq, expected)

    def test_seq_is_odd_while_the_body_is_written(self):
        with self.writer._updating():
            self.assertEqual(struct.unpack_from("<Q", self.read(), shm.SEQ_OFFSET)[0] % 2, 1)

    def test_long_names_are_cut_on_a_character_boundary(self):
        self.record.job = "é" * 40  # 80 bytes of UTF-8
        self.writer.publish(self.record)
        job = self.read()[296:360].rstrip(b"\0")
        self.assertEqual(job.decode("utf-8"), "é" * 32)

    def test_file_appears_complete_and_close_removes_it(self):
        self.assertEqual(os.listdir(self.dir.name), [shm.rank_file_name(5, 4242)])
        with open(self.writer.checkpoint_path, "w") as f:
            f.write("1\n")
        self.writer.close()
        self.assertEqual(os.listdir(self.dir.name), [])

    def test_a_value_outside_its_fields_range_is_written_clamped(self):
        self.record.batch_tokens, self.record.checkpoint_ack = -30000, 2 ** 70
        self.record.loader_queue_depth, self.record.gpu = -2 ** 70, 2 ** 40
        self.writer.publish(self.record)
        raw, fields = self.read(), {name: (offset, kind) for offset, kind, name in documented_fields()}
        values = [struct.unpack_from(FORMATS[fields[name][1]], raw, fields[name][0])[0]
                  for name in ("batch_tokens", "checkpoint_ack", "loader_queue_depth", "gpu")]
        self.assertEqual(values, [0, 2 ** 64 - 1, -2 ** 63, 2 ** 31 - 1])

    def test_a_float_or_no_number_given_for_a_field_is_written_not_withdrawn(self):
        self.record.batch_tokens, self.record.checkpoint_ack = 1536.7, float("nan")
        self.record.loader_queue_depth, self.record.gpu = float("-inf"), "3"
        self.record.step_seconds, self.record.samples_per_second = None, 2
        self.writer.publish(self.record)
        raw, fields = self.read(), {name: (offset, kind) for offset, kind, name in documented_fields()}
        names = ("batch_tokens", "checkpoint_ack", "loader_queue_depth", "gpu", "step_seconds", "samples_per_second")
        values = [struct.unpack_from(FORMATS[fields[name][1]], raw, fields[name][0])[0] for name in names]
        self.assertEqual(values, [1536, 0, -2 ** 63, 3, 0.0, 2.0])
        self.record.batch_tokens = 7
        self.writer.publish(self.record)  # the file still publishes
        self.assertEqual(struct.unpack_from(FORMATS[fields["batch_tokens"][1]], self.read(),
                                            fields["batch_tokens"][0])[0], 7)

    def test_close_leaves_the_file_of_another_writer_that_took_its_name(self):
        # A job in another PID namespace whose process has the same rank and pid publishes under the same name.
        theirs = self.writer.path + ".theirs"
        with open(theirs, "wb") as f:
            f.write(bytes(shm.SIZE))
        os.rename(theirs, self.writer.path)
        with open(self.writer.checkpoint_path, "w") as f:
            f.write("1\n")
        self.writer.close()
        names = [shm.rank_file_name(5, 4242), shm.rank_file_name(5, 4242) + shm.CHECKPOINT_SUFFIX]
        self.assertEqual(sorted(os.listdir(self.dir.name)), names)

    def test_a_forked_child_closing_its_copy_leaves_the_parents_file(self):
        with open(self.writer.checkpoint_path, "w") as f:
            f.write("1\n")
        pid = os.fork()
        if pid == 0:  # the child: what its exit handlers would do with the inherited writer
            try:
                self.writer.close()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        names = [shm.rank_file_name(5, 4242), shm.rank_file_name(5, 4242) + shm.CHECKPOINT_SUFFIX]
        self.assertEqual(sorted(os.listdir(self.dir.name)), names)
        self.writer.publish(self.record)
        self.writer.close()
        self.assertEqual(os.listdir(self.dir.name), [])


if __name__ == "__main__":
    unittest.main()
