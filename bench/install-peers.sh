#!/usr/bin/env bash
# Installs the peer data loaders measured by bench/e2e_peers.py into a venv
# that sees Debian's python3-torch / torchvision / numpy / PIL / cv2
# (--system-site-packages), never installing torch, torchvision or numpy.
#
#   bench/install-peers.sh [VENV]          (default /tmp/ufspack-peers-venv)
#   PEERS="webdataset litdata" bench/install-peers.sh   (a subset)
#   PEERS=wids bench/install-peers.sh      (bench/samples_bench.py's peer; not in the default set)
#   PEERS=ratarmount bench/install-peers.sh  (bench/mount_bench.py's peer; not in the default set)
#
# Then run the harness with VENV/bin/python.  Idempotent: pinned versions that
# are already there are left alone.  Every package goes in with --no-deps and
# an explicit, pinned list of what it needs to import and run on CPU.
#
# Prerequisites (Debian 12): python3-venv python3-torch python3-torchvision;
# for ffcv, which is built from source: g++ pkg-config libopencv-dev
# libturbojpeg0-dev.
set -u

VENV=${1:-/tmp/ufspack-peers-venv}
PY=/usr/bin/python3
PEERS=${PEERS:-"webdataset litdata streaming ffcv dali mxnet_recordio tfrecord"}

# name | pinned requirements | import check (run with VENV python)
declare -A REQS CHECK
REQS[webdataset]="webdataset==1.0.2 braceexpand==0.1.7"
CHECK[webdataset]="import webdataset"
# wids (WebDataset's indexed random-access reader) ships in webdataset <= 0.2.x only: 0.2.100 goes into
# VENV/wids-0.2.100 (its webdataset removed, so 1.0.2 above stays the one imported), on sys.path by a .pth.
REQS[wids]="webdataset==0.2.100"
CHECK[wids]="import wids; from importlib.metadata import version; assert version('webdataset').startswith('1.'), version('webdataset')"
# litdata >= 0.2.48 uses torch.uint16 (torch >= 2.3) at import; 0.2.47 is the last that works with torch 1.13.
REQS[litdata]="litdata==0.2.47 lightning-utilities==0.15.3 filelock==4.2.11 tifffile==2026.3.3 boto3==1.44.5 botocore==1.44.5 jmespath==1.1.0 s3transfer==0.19.3"
CHECK[litdata]="from litdata import optimize, StreamingDataset"
# streaming imports transformers at import time (only BatchFeature/BatchEncoding); transformers checks its own deps.
REQS[streaming]="mosaicml-streaming==0.13.0 transformers==4.57.6 huggingface-hub==0.36.2 tokenizers==0.22.2 safetensors==0.8.0 regex==2026.11.15 tqdm==4.70.1 filelock==4.2.11 fsspec==2026.9.0 hf-xet==1.8.0 python-snappy==0.7.3 cramjam==2.14.0 zstd==1.5.7.2 xxhash==3.8.2 catalogue==2.0.10"
CHECK[streaming]="from streaming import MDSWriter, StreamingDataset"
# ffcv 1.0.2 is an sdist: compiled here against pkg-config opencv4 + libturbojpeg.
REQS[ffcv]="ffcv==1.0.2 numba==0.58.1 llvmlite==0.41.1 tqdm==4.70.1"
CHECK[ffcv]="import ffcv.loader, ffcv.writer"
# DALI: CPU-only pipelines (device_id=None).  e2e_peers reads tar shards and decodes with PIL;
# transform_bench decodes with DALI on the CPU, which loads nvidia-nvimgcodec-cu12's libjpeg-turbo
# extension (no GPU or CUDA runtime needed; its GPU extensions log that nvJPEG/nvJPEG2000/nvTIFF
# are missing and stay unregistered).
# optree needs a newer typing_extensions than Debian's 4.4.0 (installed into the venv only).
REQS[dali]="nvidia-dali-cuda120==2.4.0 nvidia-nvimgcodec-cu12==0.9.0.20 optree==0.20.0 astunparse==1.6.3 gast==0.5.2"
CHECK[dali]="from nvidia.dali import Pipeline, fn; from wds2idx import IndexCreator"
# mxnet 1.9.1 (last release; py3-none wheel) uses np.bool, gone in numpy 1.24: e2e_peers sets np.bool = bool first.
REQS[mxnet_recordio]="mxnet==1.9.1"
CHECK[mxnet_recordio]="import numpy as np; np.bool = bool; import mxnet; from mxnet import recordio"
# s3torchconnector: only for bench/remote_bench.py (not in the default PEERS: e2e.py has no adapter
# for it), PEERS=s3torch.  It declares torch>=2.0.1, but S3MapDataset/S3IterableDataset run on
# Debian's torch 1.13 (checked by bench/remote_bench.py --smoke).
REQS[s3torch]="s3torchconnector==1.5.0 s3torchconnectorclient==1.5.0"
CHECK[s3torch]="from s3torchconnector import S3MapDataset, S3ClientConfig"
# ratarmount: only for bench/mount_bench.py (not in the default PEERS), PEERS=ratarmount.  A tar needs
# only ratarmountcore and mfusepy of its dependencies (the others serve zip, 7z, rar, gzip, xz, zstd).
REQS[ratarmount]="ratarmount==1.3.0 ratarmountcore==0.11.1 mfusepy==3.1.1"
CHECK[ratarmount]="import ratarmount, ratarmountcore, mfusepy"
# tfrecord: pure-Python TFRecord reader/writer (no TensorFlow).
REQS[tfrecord]="tfrecord==1.14.6 protobuf==7.36.2 crc32c==2.9.post0"
CHECK[tfrecord]="from tfrecord.writer import TFRecordWriter; from tfrecord.reader import tfrecord_loader"

if ! "$PY" -c 'import sys, torch, torchvision; assert sys.version_info[:2] >= (3, 10)' 2>/dev/null; then
    echo "error: $PY needs python3-torch and python3-torchvision (apt)" >&2
    exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv --system-site-packages "$VENV" || { echo "error: could not create $VENV (apt install python3-venv)" >&2; exit 1; }
fi
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip install --no-deps --disable-pip-version-check -q)

OK=()
FAILED=()
for name in $PEERS; do
    if [ -z "${REQS[$name]:-}" ]; then
        FAILED+=("$name: unknown peer")
        continue
    fi
    echo "== $name: ${REQS[$name]}"
    if [ "$name" = ffcv ]; then
        if ! command -v g++ >/dev/null || ! pkg-config --exists opencv4 libturbojpeg 2>/dev/null; then
            FAILED+=("ffcv: needs g++, pkg-config, libopencv-dev, libturbojpeg0-dev (apt) to build")
            continue
        fi
    fi
    if [ "$name" = dali ]; then
        # Debian's typing_extensions (4.4.0) lacks TypeAliasType (optree): shadow it in the venv.
        if ! "$VPY" -c "import typing_extensions as t, sys; sys.exit(0 if t.__file__.startswith('$VENV/') else 1)" 2>/dev/null; then
            "${PIP[@]}" --ignore-installed typing_extensions==4.16.0 || { FAILED+=("dali: pip install typing_extensions failed"); continue; }
        fi
    fi
    if [ "$name" = wids ]; then
        WIDS_DIR="$(cd "$VENV" && pwd)/wids-0.2.100"
        if ! err=$("${PIP[@]}" --target "$WIDS_DIR" --upgrade ${REQS[$name]} 2>&1); then
            FAILED+=("wids: pip install failed: $(echo "$err" | grep -v '^\s*$' | tail -1)")
            continue
        fi
        rm -rf "$WIDS_DIR"/webdataset "$WIDS_DIR"/webdataset-*.dist-info
        "$VPY" -c "import site; open(site.getsitepackages()[0] + '/ufspack-wids.pth', 'w').write('$WIDS_DIR\n')"
        if ! err=$("$VPY" -W ignore -c "${CHECK[$name]}" 2>&1); then
            FAILED+=("wids: import failed: $(echo "$err" | tail -1)")
            continue
        fi
        OK+=("wids (${REQS[$name]})")
        continue
    fi
    # shellcheck disable=SC2086
    if ! err=$("${PIP[@]}" ${REQS[$name]} 2>&1); then
        FAILED+=("$name: pip install failed: $(echo "$err" | grep -v '^\s*$' | tail -1)")
        continue
    fi
    if ! err=$("$VPY" -W ignore -c "${CHECK[$name]}" 2>&1); then
        FAILED+=("$name: import failed: $(echo "$err" | tail -1)")
        continue
    fi
    OK+=("$name (${REQS[$name]%% *})")
done

# torch must still be Debian's
if ! "$VPY" -c "import torch, sys; sys.exit(0 if torch.__file__.startswith('/usr/lib/python3/') else 1)"; then
    echo "warning: torch in $VENV is not Debian's python3-torch" >&2
fi

echo
echo "venv: $VENV"
echo "installed (${#OK[@]}):"
for x in "${OK[@]}"; do echo "  $x"; done
echo "not installed (${#FAILED[@]}):"
for x in "${FAILED[@]}"; do echo "  $x"; done
echo "not available at all:"
echo "  nvidia-dali (the unsuffixed name is not on PyPI; nvidia-dali-cuda120/cuda110 are, used above as 'dali')"
echo "  DALI GPU decoding (nvJPEG): no GPU here; CPU decoding uses nvimgcodec's libjpeg-turbo"
echo "peers usable by bench/e2e.py:"
"$VPY" "$(cd "$(dirname "$0")" && pwd)/e2e.py" list --group peer | sed 's/^/  /'
[ ${#FAILED[@]} -eq 0 ]
