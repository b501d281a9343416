#!/bin/bash
# Records the plan-calibration shapes with the fixtures' recorder; one tarball back.
set -u
R=/tmp/shapes; mkdir -p $R
export PYTHONUNBUFFERED=1
rec() { name=$1; shift; echo "== $name $*"; timeout 60 python3 .device/record.py $name --out $R/$name --steps 4 "$@" 2>&1 | tail -2; }
rec p3 --hidden 1024 --layers 8 --heads 8 --inter 2816 --fixed-len 1024 --mbs 8 --ga 2 --history
rec p4 --hidden 2048 --layers 12 --heads 16 --kv-heads 4 --fixed-len 4096 --mbs 2 --ga 2
rec p5 --hidden 3072 --layers 8 --heads 24 --kv-heads 8 --inter 8192 --vocab 50304 --fixed-len 2048 --mbs 2 --ga 2 --ckpt
rec p6 --hidden 1536 --layers 12 --heads 12 --inter 4096 --vocab 128256 --fixed-len 1024 --mbs 4 --ga 1
rec p8 --hidden 2048 --layers 8 --heads 32 --kv-heads 8 --inter 8192 --fixed-len 8192 --mbs 1 --ga 2 --ckpt
rec p7 --hidden 1024 --layers 8 --heads 16 --inter 2816 --fixed-len 1024 --mbs 4 --ga 2 --attn eager --history
rec p9 --hidden 1024 --layers 8 --heads 16 --inter 2816 --fixed-len 2048 --mbs 2 --ga 2 --attn eager --ckpt
rec p10 --fsdp --fixed-len 2048 --mbs 4 --ga 2 --history
mkdir -p $OUT
tar czf $OUT/shapes.tgz -C $R --exclude='snapshot.pickle' .
tar czf $OUT/snaps.tgz -C $R $(cd $R && ls -d */snapshot.pickle 2>/dev/null)
ls -la $OUT
