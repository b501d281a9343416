"""The torch side of the hook never crashes or blocks the job it observes: the Monitor, StepWatch, the
callbacks and the capture under the cudaMallocAsync allocator backend, on a full disk, with a rank whose
hook failed to start, and in a forked child.

torch is not installed where this runs: each case runs in a child whose path starts with a stand-in
`torch` (and `lightning`, `transformers`) holding just the calls the hook makes. Its allocator refuses
memory history, the OOM observer and snapshots with PyTorch's own errors when told to, as the
cudaMallocAsync backend does. bench/hook/async_backend_check.py runs the same cases with the real
PyTorch on a GPU.
"""

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

SOURCE_PYTHON = os.path.join(os.path.abspath(os.environ.get("FRAGSCOPE_SOURCE_DIR", ".")), "python")

STAND_IN = {
    "torch/__init__.py": """
        from . import cuda, distributed, optim, utils
        from .cuda import _C

        __version__ = "0.0+stand-in"


        class Tensor:
            def __init__(self, values, device="cpu"):
                self.values, self.device, self.shape = list(values), str(device), (len(values),)

            def dim(self):
                return 1

            def item(self):
                return self.values[0]

            def to(self, device, non_blocking=False):
                return Tensor(self.values, device)


        def tensor(values, device="cpu"):
            return Tensor(values, device)


        class device:
            def __init__(self, spec):
                self.spec = str(spec)
                self.type, _, index = self.spec.partition(":")
                self.index = int(index) if index else None

            def __str__(self):
                return self.spec
    """,
    "torch/cuda.py": """
        import types

        backend = "native"  # what get_allocator_backend() answers
        refuses = False     # history, the OOM observer and snapshots raise, as under cudaMallocAsync
        calls = []          # the allocator calls made, in order


        class OutOfMemoryError(RuntimeError):
            pass


        def _allocator(call):
            calls.append(call)
            if refuses:
                raise RuntimeError(f"cudaMallocAsync does not yet support {call}. If you need it, please file an "
                                   "issue describing your use case.")


        def get_allocator_backend():
            return backend


        def _record_memory_history(enabled="all", max_entries=0, stacks="all"):
            _allocator("recordHistory" if enabled else "recordHistory off")


        def memory_snapshot():
            _allocator("snapshot")
            return []


        def _dump_snapshot(path):
            _allocator("snapshot")


        def _attach_observer(observer):
            _allocator("attachOutOfMemoryObserver")


        _C = types.SimpleNamespace(_cuda_attach_out_of_memory_observer=_attach_observer)
        memory = types.SimpleNamespace(memory_stats_as_nested_dict=lambda device=None: {"num_ooms": 0},
                                       _record_memory_history=_record_memory_history, _dump_snapshot=_dump_snapshot)


        class Event:
            def __init__(self, enable_timing=False):
                pass

            def record(self):
                pass

            def synchronize(self):
                pass

            def query(self):
                return True

            def elapsed_time(self, end):
                return 1.0  # ms


        def is_initialized():
            return True


        def current_device():
            return 0


        def mem_get_info(device=None):
            return 1 << 30, 1 << 34


        def get_device_properties(device):
            return types.SimpleNamespace(uuid="GPU-stand-in")


        def memory_stats(device=None):
            return {}


        def memory_summary(device=None):
            return ""
    """,
    "torch/distributed.py": """
        initialized = False
        backend = "nccl"
        devices = []    # the device of each all_reduce's tensor
        others = 0      # what the other ranks contribute to MAX
        failure = None  # raised by all_reduce when set


        class ReduceOp:
            MAX = "max"


        def is_available():
            return True


        def is_initialized():
            return initialized


        def get_backend():
            return backend


        def all_reduce(tensor, op):
            if failure:
                raise failure
            devices.append(tensor.device)
            tensor.values[0] = max(tensor.values[0], others)
    """,
    "torch/utils/__init__.py": "from . import data\n",
    "torch/utils/data/__init__.py": "from . import dataloader\n",
    "torch/utils/data/dataloader.py": """
        class _BaseDataLoaderIter:
            def __init__(self, batches):
                self._batches = iter(batches)

            def __next__(self):
                return next(self._batches)
    """,
    "torch/optim/__init__.py": "from . import optimizer\n",
    "torch/optim/optimizer.py": """
        hooks = []


        class _Handle:
            def __init__(self, hook):
                self.hook = hook

            def remove(self):
                hooks.remove(self.hook)


        def register_optimizer_step_post_hook(hook):
            hooks.append(hook)
            return _Handle(hook)
    """,
    "lightning/__init__.py": "",
    "lightning/pytorch/__init__.py": "class Callback:\n    pass\n",
    "transformers/__init__.py": "class TrainerCallback:\n    pass\n",
}

# What every case starts with: the stand-in configured by argv[2] (a JSON object), a rank folder and an out folder.
PRELUDE = """
import json, os, sys, threading
import torch
from fragscope import background_writer, loader_wait, oom
tmp = sys.argv[1]
for name, value in json.loads(sys.argv[2]).items():
    module, _, attribute = name.rpartition(".")
    setattr(sys.modules[module], attribute, value)
ranks, out = os.path.join(tmp, "ranks"), os.path.join(tmp, "out")
os.makedirs(ranks, 0o700, exist_ok=True)


def leftovers():
    \"\"\"What the hook may leave behind once closed: nothing.\"\"\"
    return {"rank_files": os.listdir(ranks), "listeners": len(loader_wait._listeners), "oom_hooks": len(oom._hooked),
            "publishers": sum(t.name == "fragscope-publisher" for t in threading.enumerate()),
            "optimizer_hooks": len(torch.optim.optimizer.hooks)}


def report(**values):
    print(json.dumps(values))
"""

ASYNC = {"torch.cuda.backend": "cudaMallocAsync", "torch.cuda.refuses": True}
NOTHING_LEFT = {"rank_files": [], "listeners": 0, "oom_hooks": 0, "publishers": 0, "optimizer_hooks": 0}
ASYNC_NOTICE = ("fragscope: memory history, OOM snapshots and the largest free block are off: the cudaMallocAsync "
                "allocator backend keeps no history or snapshot and calls no OOM observer (an OOM still writes "
                "stats.json, summary.txt and meta.json)")


class StandInTorchCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.site = os.path.join(self.tmp.name, "site")
        for path, text in STAND_IN.items():
            os.makedirs(os.path.dirname(os.path.join(self.site, path)), exist_ok=True)
            with open(os.path.join(self.site, path), "w", encoding="utf-8") as f:
                f.write(textwrap.dedent(text))

    def tearDown(self):
        self.tmp.cleanup()

    def run_case(self, *code, stand_in=None, preexec_fn=None):
        """Runs PRELUDE and the pieces of code in a child; returns (its last report, its notices)."""
        program = PRELUDE + "".join(textwrap.dedent(piece) for piece in code)
        result = subprocess.run([sys.executable, "-c", program, self.tmp.name,
                                 json.dumps(stand_in or {})], capture_output=True, text=True, timeout=60,
                                env=dict(os.environ, PYTHONPATH=self.site + os.pathsep + SOURCE_PYTHON),
                                preexec_fn=preexec_fn)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout.splitlines()[-1]), result.stderr.splitlines()


class MonitorTest(StandInTorchCase):
    LOOP = """
        from fragscope.torch import Monitor
        mon = Monitor(OUT, rank_dir=ranks, history_max_entries=HISTORY, largest_free_every=1, heartbeat_s=0.01)
        with mon:
            for batch in mon.loader([torch.tensor([1, 2, 3])] * 200):
                with mon.step(batch):
                    mon.to_device(batch)
        report(steps=mon.steps, calls=torch.cuda.calls, leftovers=leftovers())
    """

    def test_under_cuda_malloc_async_the_loop_runs_without_snapshot_features_and_one_notice(self):
        for out, history in (("out", 1000), (None, None)):  # without history, a step would sample the free block
            with self.subTest(out_dir=out, history=history):
                result, notices = self.run_case(f"OUT = {out}\nHISTORY = {history}\n", self.LOOP, stand_in=ASYNC)
                self.assertEqual(result, {"steps": 200, "calls": [], "leftovers": NOTHING_LEFT})
                self.assertEqual(notices, [ASYNC_NOTICE])

    def test_under_cuda_malloc_async_an_oom_still_writes_its_stats_summary_and_message(self):
        code = """
            from fragscope.torch import Monitor
            from fragscope.watch import StepWatch
            for name, make in (("monitor", lambda folder: Monitor(folder, rank_dir=False)),
                               ("watch", lambda folder: StepWatch(folder, rank_dir=False))):
                hook = make(os.path.join(out, name))
                try:
                    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")
                except torch.cuda.OutOfMemoryError as error:
                    (hook._oom if name == "monitor" else hook.oom).on_error(error)
                hook.close()
            background_writer.flush(10)
            folders = {name: sorted(os.listdir(os.path.join(out, name, "rank0"))) for name in ("monitor", "watch")}
            metas = [json.load(open(os.path.join(out, name, "rank0", "meta.json"))) for name in ("monitor", "watch")]
            report(folders=folders, calls=torch.cuda.calls,
                   metas=[(m["oom_message"], m["snapshot"], m["memory_history"], m["observer"]) for m in metas])
        """
        result, notices = self.run_case(code, stand_in=ASYNC)
        files = ["meta.json", "stats.json", "summary.txt"]
        self.assertEqual(result["folders"], {"monitor": files, "watch": files})
        self.assertEqual(result["calls"], [])  # neither the observer nor a snapshot was asked for
        self.assertEqual(result["metas"], [["CUDA out of memory. Tried to allocate 2.00 GiB.", False, False, None]] * 2)
        self.assertEqual(notices, [ASYNC_NOTICE])

    def test_an_allocator_that_refuses_unannounced_turns_each_feature_off_once(self):
        # A torch without get_allocator_backend(): the calls themselves fail, each once.
        result, notices = self.run_case("del torch.cuda.get_allocator_backend\nOUT, HISTORY = out, 1000\n", self.LOOP,
                                        stand_in={"torch.cuda.refuses": True})
        self.assertEqual(result, {"steps": 200, "calls": ["recordHistory", "attachOutOfMemoryObserver", "snapshot"],
                                  "leftovers": NOTHING_LEFT})
        self.assertEqual([notice.split(":")[1] for notice in notices],
                         [" memory history not recorded", " OOM dumps off", " largest free block not sampled"])

    def test_a_full_disk_costs_the_telemetry_not_the_loop(self):
        def limit_file_size():  # writes past 16 KiB fail with EFBIG, as a full disk fails with ENOSPC
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))

        result, notices = self.run_case("OUT, HISTORY = out, 1000\n", self.LOOP, preexec_fn=limit_file_size)
        self.assertEqual((result["steps"], result["leftovers"]), (200, NOTHING_LEFT))
        self.assertEqual(notices, [f"fragscope: telemetry disabled: {self.tmp.name}/out/rank0/steps.jsonl: "
                                   "File too large"])

    def test_copies_without_steps_keep_a_bounded_number_of_events_and_all_their_time(self):
        code = """
            from fragscope.torch import COPIES_KEPT, Monitor
            with Monitor(out, rank_dir=False) as mon:
                kept = 0
                for _ in range(1000):  # an eval loop that copies and never steps
                    mon.to_device(torch.tensor([1]))
                    kept = max(kept, len(mon._copies))
                with mon.step():
                    pass
            background_writer.flush(10)
            with open(os.path.join(out, "rank0", "steps.jsonl")) as f:
                report(kept=kept, limit=COPIES_KEPT, h2d_ms=json.loads(f.readline())["h2d_ms"])
        """
        result, _ = self.run_case(code)
        self.assertLessEqual(result["kept"], result["limit"])
        self.assertAlmostEqual(result["h2d_ms"], 1000 * 1.0)  # every copy's 1 ms still counts

    def test_a_stalled_file_system_never_stalls_a_step(self):
        code = """
            import time
            from fragscope.torch import Monitor
            stalled, write = threading.Event(), background_writer.write_all

            def stalled_write(fd, data):  # an NFS server gone away, until it comes back
                stalled.wait(60)
                write(fd, data)

            background_writer.write_all = stalled_write
            longest = 0.0
            with Monitor(out, rank_dir=ranks, heartbeat_s=0.01) as mon:
                for batch in mon.loader([torch.tensor([1, 2, 3])] * 200):
                    start = time.perf_counter()
                    with mon.step(batch):
                        mon.to_device(batch)
                    longest = max(longest, time.perf_counter() - start)
            pending = not background_writer.flush(0.1)
            stalled.set()
            background_writer.flush(10)
            with open(os.path.join(out, "rank0", "steps.jsonl")) as f:
                steps = [json.loads(line)["step"] for line in f]
            report(longest=longest, pending=pending, steps=steps, leftovers=leftovers())
        """
        result, notices = self.run_case(code)
        self.assertLess(result["longest"], 0.5, "a step waited for the stalled write")
        self.assertTrue(result["pending"], "the lines were still waiting for the file system when the loop ended")
        self.assertEqual((result["steps"], result["leftovers"], notices), (list(range(200)), NOTHING_LEFT, []))

    def test_a_constructor_that_fails_leaves_nothing_started(self):
        code = """
            import signal
            from fragscope.torch import Monitor
            failures = []

            def construct():  # a signal cannot be caught outside the main thread
                try:
                    Monitor(out, rank_dir=ranks, history_max_entries=1000, checkpoint_signal=signal.SIGUSR1)
                except ValueError as error:
                    failures.append(str(error))

            thread = threading.Thread(target=construct)
            thread.start()
            thread.join()
            report(failures=len(failures), leftovers=leftovers())
        """
        result, _ = self.run_case(code)
        self.assertEqual(result, {"failures": 1, "leftovers": NOTHING_LEFT})


class StepWatchTest(StandInTorchCase):
    def test_under_cuda_malloc_async_it_starts_and_closes_without_leftovers(self):
        code = """
            from fragscope.watch import StepWatch
            watch = StepWatch(out, rank_dir=ranks, history_max_entries=1000, heartbeat_s=0.01)
            started = leftovers()
            for _ in range(20):
                watch.step_begin()
                watch.step_end()
            watch.close()
            report(history=watch.history, steps=watch.recorder.steps, listening=started["listeners"],
                   calls=torch.cuda.calls, leftovers=leftovers())
        """
        result, notices = self.run_case(code, stand_in=ASYNC)
        self.assertEqual(result, {"history": False, "steps": 20, "listening": 1, "calls": [],
                                  "leftovers": NOTHING_LEFT})
        self.assertEqual(notices, [ASYNC_NOTICE])

    def test_a_refused_observer_leaves_no_listener_behind(self):
        code = """
            del torch.cuda.get_allocator_backend
            from fragscope.watch import StepWatch
            watch = StepWatch(out, rank_dir=ranks, history_max_entries=1000)
            watch.close()
            report(oom=watch.oom, leftovers=leftovers())
        """
        result, _ = self.run_case(code, stand_in={"torch.cuda.refuses": True})
        self.assertEqual(result, {"oom": None, "leftovers": NOTHING_LEFT})


class CheckpointAgreementTest(StandInTorchCase):
    """Every rank runs the same collectives, whatever failed on it; a failure inside them is not swallowed."""

    DISTRIBUTED = {"torch.distributed.initialized": True}
    LIGHTNING = """
        import types
        from fragscope.integrations.lightning import FragscopeCallback


        class Trainer:
            accumulate_grad_batches, global_step, default_root_dir, checkpoint_callback = 1, 10, tmp, None
            saved = []

            def save_checkpoint(self, path):
                if SAVE_FAILS:
                    raise OSError(28, "No space left on device", path)
                self.saved.append(os.path.basename(path))


        trainer, module = Trainer(), types.SimpleNamespace(device=torch.device("cuda:3"))
        callback = FragscopeCallback(out, rank_dir=ranks)
    """

    def test_a_rank_whose_hook_failed_to_start_still_joins_the_agreement_on_its_device(self):
        code = """
            callback.on_train_batch_end(trainer, module, None, None, 9)  # never started: no watch
            report(watch=callback.watch, devices=torch.distributed.devices, saved=trainer.saved)
        """
        result, _ = self.run_case("SAVE_FAILS = False\n", self.LIGHTNING, code,
                                  stand_in=dict(self.DISTRIBUTED, **{"torch.distributed.others": 1}))
        self.assertEqual(result, {"watch": None, "devices": ["cuda:3"], "saved": ["fragscope-request-step10.ckpt"]})

    def test_the_device_follows_the_backend_not_the_rank(self):
        code = """
            from fragscope.watch import any_rank
            report(agreed=[any_rank(False, "cuda:3"), any_rank(True, "cuda:3")], devices=torch.distributed.devices)
        """
        result, _ = self.run_case(code, stand_in=dict(self.DISTRIBUTED, **{"torch.distributed.backend": "gloo"}))
        self.assertEqual(result, {"agreed": [False, True], "devices": ["cpu", "cpu"]})

    def test_a_failed_save_reaches_lightning(self):
        code = """
            callback.on_fit_start(trainer, module)
            try:
                callback.on_train_batch_end(trainer, module, None, None, 9)
                raised = None
            except OSError as error:
                raised = error.strerror
            phase = callback.watch.recorder.phase
            callback.teardown(trainer, module, "fit")
            report(raised=raised, phase=phase, leftovers=leftovers())
        """
        result, _ = self.run_case("SAVE_FAILS = True\n", self.LIGHTNING, code,
                                  stand_in=dict(self.DISTRIBUTED, **{"torch.distributed.others": 1}))
        self.assertEqual(result, {"raised": "No space left on device", "phase": "train", "leftovers": NOTHING_LEFT})

    def test_a_failed_agreement_reaches_the_hf_trainer(self):
        code = """
            import types
            from fragscope.integrations.hf import FragscopeCallback
            torch.distributed.failure = RuntimeError("NCCL communicator was aborted")
            callback = FragscopeCallback(out, rank_dir=ranks)
            args = types.SimpleNamespace(device=torch.device("cuda:0"), output_dir=tmp)
            state, control = types.SimpleNamespace(global_step=10), types.SimpleNamespace(should_save=False)
            callback.on_train_begin(args, state, control)
            try:
                callback.on_step_end(args, state, control)
                raised = None
            except RuntimeError as error:
                raised = str(error)
            callback.on_train_end(args, state, control)
            report(raised=raised, should_save=control.should_save, leftovers=leftovers())
        """
        result, _ = self.run_case(code, stand_in=self.DISTRIBUTED)
        self.assertEqual(result, {"raised": "NCCL communicator was aborted", "should_save": False,
                                  "leftovers": NOTHING_LEFT})


class BatchTest(StandInTorchCase):
    """Monitor.to_device() and batch_shape() with the batch types loaders hand out."""

    BATCHES = """
        import collections, types
        from fragscope.cuda import batch_shape
        from fragscope.torch import Monitor
        mon = Monitor(rank_dir=False)


        class BatchEncoding(collections.UserDict):  # transformers': it moves itself, keeping the tokenizer's encodings
            def to(self, device):
                self.data = {k: v.to(device) for k, v in self.data.items()}
                return self


        class Row(torch.Tensor):  # the reductions batch_shape() makes of a mask's row sums
            def sum(self):
                return sum(self.values)

            def max(self):
                return max(self.values)


        class Matrix(torch.Tensor):  # a [B, L] CPU tensor; floating: of a float dtype
            def __init__(self, rows, floating=False):
                super().__init__(rows)
                self.shape, self.floating = (len(rows), len(rows[0])), floating
                self.device = types.SimpleNamespace(type="cpu")

            def dim(self):
                return 2

            def is_floating_point(self):
                return self.floating

            def sum(self, dim):
                return Row([sum(row) for row in self.values])


        def devices(batch):
            return [value.device for value in (batch.values() if isinstance(batch, collections.abc.Mapping) else batch)]
    """
    IDS = "Matrix([[5, 6, 7], [8, 9, 0]])"

    def test_a_namedtuple_is_moved_and_stays_a_namedtuple(self):
        code = """
            Batch = collections.namedtuple("Batch", "ids labels")  # torch's default collate keeps namedtuples
            moved = mon.to_device(Batch(torch.tensor([1]), torch.tensor([2])))
            report(type=type(moved).__name__, devices=devices(moved))
        """
        self.assertEqual(self.run_case(self.BATCHES, code), ({"type": "Batch", "devices": ["0", "0"]}, []))

    def test_a_mapping_that_moves_itself_is_moved_by_its_own_to(self):
        code = """
            batch = BatchEncoding(input_ids=torch.tensor([1, 2]), labels=torch.tensor([3, 4]))
            moved = mon.to_device(batch)
            report(same=moved is batch, devices=devices(moved))
        """
        self.assertEqual(self.run_case(self.BATCHES, code), ({"same": True, "devices": ["0", "0"]}, []))

    def test_another_mapping_is_rebuilt_as_its_type_or_else_as_a_dict(self):
        code = """
            class Keywords(collections.abc.Mapping):  # its constructor takes no dict
                def __init__(self, **items):
                    self._items = items

                def __getitem__(self, key):
                    return self._items[key]

                def __iter__(self):
                    return iter(self._items)

                def __len__(self):
                    return len(self._items)

            moved = [mon.to_device(batch) for batch in (collections.UserDict(ids=torch.tensor([1])),
                                                        Keywords(ids=torch.tensor([1])))]
            report(types=[type(m).__name__ for m in moved], devices=[devices(m) for m in moved])
        """
        result, notices = self.run_case(self.BATCHES, code)
        self.assertEqual(result, {"types": ["UserDict", "dict"], "devices": [["0"], ["0"]]})
        self.assertEqual(len(notices), 1, notices)
        self.assertRegex(notices[0], r"^fragscope: batch moved as a dict: Keywords: .*takes 1 positional argument")

    def test_a_container_the_hook_cannot_rebuild_comes_back_as_it_was_with_one_notice(self):
        code = """
            class Pair(tuple):  # its constructor takes two items, not an iterable
                def __new__(cls, first, second):
                    return super().__new__(cls, (first, second))

            batch = Pair(torch.tensor([1]), torch.tensor([2]))
            report(same=[mon.to_device(batch) is batch for _ in range(3)], devices=devices(batch))
        """
        result, notices = self.run_case(self.BATCHES, code)
        self.assertEqual(result, {"same": [True] * 3, "devices": ["cpu", "cpu"]})
        self.assertEqual(len(notices), 1, notices)
        self.assertRegex(notices[0], r"^fragscope: batch not moved: .*missing 1 required positional argument")

    def test_the_shape_of_a_batch_encoding_is_read_with_its_attention_mask(self):
        code = f"""
            batch = BatchEncoding(input_ids={self.IDS}, attention_mask=Matrix([[1, 1, 0], [1, 0, 0]]))
            report(shape=batch_shape(batch))
        """
        self.assertEqual(self.run_case(self.BATCHES, code), ({"shape": [2, 3, 2]}, []))

    def test_a_float_attention_mask_counts_every_position(self):
        # An additive mask (0 to keep, -10000 to drop) sums to no token count.
        code = f"""
            mask = Matrix([[0.0, 0.0, -10000.0], [0.0, -10000.0, -10000.0]], floating=True)
            report(shape=batch_shape({{"input_ids": {self.IDS}, "attention_mask": mask}}))
        """
        self.assertEqual(self.run_case(self.BATCHES, code), ({"shape": [2, 6, 3]}, []))


class CaptureTest(StandInTorchCase):
    SETTINGS = "from fragscope import capture\nsettings = capture.Settings(out_dir=out, rank_dir=ranks)\n"

    def test_stop_undoes_every_part_when_turning_history_off_fails(self):
        code = """
            running = capture.start(settings)
            torch.cuda.refuses = True  # history was turned on; turning it off fails
            capture.stop()
            report(history=running.watch.history, calls=torch.cuda.calls, leftovers=leftovers())
        """
        result, notices = self.run_case(self.SETTINGS, code)
        self.assertEqual(result, {"history": True, "leftovers": NOTHING_LEFT,
                                  "calls": ["recordHistory", "attachOutOfMemoryObserver", "recordHistory off"]})
        self.assertEqual(len(notices), 1)
        self.assertRegex(notices[0], "^fragscope: memory history not turned off: RuntimeError: cudaMallocAsync")

    def test_stop_turns_off_only_the_history_it_turned_on(self):
        code = """
            running = capture.start(settings)
            capture.stop()
            report(history=running.watch.history, calls=torch.cuda.calls, leftovers=leftovers())
        """
        result, notices = self.run_case(self.SETTINGS, code, stand_in=ASYNC)
        self.assertEqual(result, {"history": False, "calls": [], "leftovers": NOTHING_LEFT})
        self.assertEqual(notices, [ASYNC_NOTICE])

    def test_a_forked_child_that_exits_leaves_the_parents_capture_alone(self):
        code = """
            import atexit

            def calls_at_exit():  # registered first, so it runs after the capture's own exit handler
                with open(os.path.join(tmp, f"calls-{os.getpid()}.json"), "w") as f:
                    json.dump(torch.cuda.calls, f)

            atexit.register(calls_at_exit)
            capture.start(settings)
            child = os.fork()
            if child == 0:
                sys.exit(0)  # a normal exit: the exit handlers run in the child
            os.waitpid(child, 0)
            with open(os.path.join(tmp, f"calls-{child}.json")) as f:
                report(child_calls=json.load(f), rank_files=os.listdir(ranks), parent=os.getpid())
        """
        result, _ = self.run_case(self.SETTINGS, code)
        self.assertEqual(result["child_calls"], ["recordHistory", "attachOutOfMemoryObserver"])
        self.assertEqual(result["rank_files"], [f"rank0-pid{result['parent']}.fsr"])
        with open(os.path.join(self.tmp.name, f"calls-{result['parent']}.json")) as f:  # the parent's own exit
            self.assertEqual(json.load(f), ["recordHistory", "attachOutOfMemoryObserver", "recordHistory off"])
        self.assertEqual(os.listdir(os.path.join(self.tmp.name, "ranks")), [])


if __name__ == "__main__":
    unittest.main()
