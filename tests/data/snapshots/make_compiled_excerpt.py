#!/usr/bin/env python3
"""Makes compiled_unknown_line.pickle: trace entries 90-99 of a torch.compile recording (standard library only).

    python3 make_compiled_excerpt.py ../field/cro_cal/snapshot.pickle.zst compiled_unknown_line.pickle

Entries 93 and 94 of that recording (PyTorch 2.11, torch.compile(mode="reduce-overhead")) carry a
frame of torch/_subclasses/fake_tensor.py whose line is 2^64 - 1, which CPython pickles as a 9-byte
LONG1. The excerpt keeps the recording's allocator_settings and no segments.
"""
import io
import pickle
import subprocess
import sys


class BuiltinsOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing {module}.{name}: a snapshot holds only builtins")


def main():
    stored = subprocess.run(["zstd", "-dc", sys.argv[1]], check=True, capture_output=True).stdout
    snapshot = BuiltinsOnly(io.BytesIO(stored)).load()
    excerpt = {"segments": [], "device_traces": [snapshot["device_traces"][0][90:100]],
               "allocator_settings": snapshot["allocator_settings"], "external_annotations": []}
    with open(sys.argv[2], "wb") as f:
        pickle.dump(excerpt, f, protocol=4)


if __name__ == "__main__":
    main()
