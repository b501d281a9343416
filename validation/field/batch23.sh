#!/usr/bin/env bash
# Field batch 23 (issue #15, sixteenth session): batch 18's vid_lo again (the video recipe at 0.92 × its peak
# allocated, where cuBLAS could not create the backward's handle), dumping a snapshot where the RuntimeError
# is caught, as the doctor's "what would decide it" asks after a library's own allocation failure.
source "$(dirname "$0")/lib.sh"
field_begin field23
record vid_err 11.526 tv_video.py --batch 24 --steps 12 --dump-on-error
field_end field23
