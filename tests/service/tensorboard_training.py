#!/usr/bin/env python3
"""A stand-in training script that logs to TensorBoard as PyTorch's
SummaryWriter does, for the agent's end-to-end tests (issue 24).

It writes an event file (events.out.tfevents.<time>.<host>.<pid>.0) under
$DP_TENSORBOARD_DIR (set by debugplane-agent), in a Hugging Face-like run
directory (runs/<name>/), appending one TFRecord record per logged value
and flushing it at once: a scalar `train/loss` (simple_value) each step, an
`eval/loss` every 5 steps, and a `gradients/fc1.weight` histogram each
step. From --nan-at on the loss is NaN. It runs until --steps or until a
signal ends it (SIGTERM's default action: the agent's stop).

Written from the formats (TFRecord framing with masked CRC32C; the Event,
Summary and HistogramProto protobuf messages of TensorFlow's event.proto
and summary.proto), with the standard library only.
"""

import argparse
import math
import os
import socket
import struct
import sys
import time


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(payload):
    length = struct.pack("<Q", len(payload))
    return (length + struct.pack("<I", masked_crc(length)) + payload +
            struct.pack("<I", masked_crc(payload)))


# Protocol buffers wire format: just what these messages use.
def varint(value):
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def key(field, wire_type):
    return varint((field << 3) | wire_type)


def length_delimited(field, data):
    return key(field, 2) + varint(len(data)) + data


def double(field, value):
    return key(field, 1) + struct.pack("<d", value)


def event(step, what):
    """An Event: wall_time (1), step (2) and one of file_version (3) or
    summary (5), given as `what` (already encoded)."""
    return double(1, time.time()) + key(2, 0) + varint(step) + what


def scalar_value(tag, value):
    # Summary.Value: tag (1), simple_value (2, float).
    return length_delimited(1, tag.encode()) + key(2, 5) + struct.pack("<f", value)


def histogram_value(tag, values):
    # Summary.Value: tag (1), histo (5): HistogramProto min (1), max (2),
    # num (3), sum (4), sum_squares (5), bucket_limit (6, packed) and
    # bucket (7, packed).
    limits = [-1.0, -0.1, 0.0, 0.1, 1.0, float("inf")]
    counts = [0.0] * len(limits)
    for v in values:
        for i, limit in enumerate(limits):
            if v <= limit:
                counts[i] += 1
                break
    histo = (double(1, min(values)) + double(2, max(values)) + double(3, len(values)) +
             double(4, sum(values)) + double(5, sum(v * v for v in values)) +
             length_delimited(6, b"".join(struct.pack("<d", x) for x in limits)) +
             length_delimited(7, b"".join(struct.pack("<d", x) for x in counts)))
    return length_delimited(1, tag.encode()) + length_delimited(5, histo)


def summary(*values):
    return length_delimited(5, b"".join(length_delimited(1, v) for v in values))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--step-ms", type=int, default=20)
    parser.add_argument("--nan-at", type=int, default=-1)
    parser.add_argument("--run", default="Nov28_08-00-00_host")
    args = parser.parse_args()
    log_dir = os.environ.get("DP_TENSORBOARD_DIR")
    if not log_dir:
        sys.exit("tensorboard_training.py: DP_TENSORBOARD_DIR is not set")
    if os.environ.get("TENSORBOARD_LOGGING_DIR") != log_dir:
        sys.exit("tensorboard_training.py: TENSORBOARD_LOGGING_DIR is not DP_TENSORBOARD_DIR")
    run_dir = os.path.join(log_dir, "runs", args.run)
    os.makedirs(run_dir, exist_ok=True)
    name = "events.out.tfevents.%d.%s.%d.0" % (time.time(), socket.gethostname(), os.getpid())
    with open(os.path.join(run_dir, name), "ab") as out:
        out.write(record(event(0, length_delimited(3, b"brain.Event:2"))))
        out.flush()
        for step in range(args.steps):
            loss = float("nan") if 0 <= args.nan_at <= step else 2.0 / (1 + step)
            values = [scalar_value("train/loss", loss),
                      histogram_value("gradients/fc1.weight",
                                      [0.01 * ((step + i) % 7 - 3) for i in range(32)])]
            if step % 5 == 4:
                values.append(scalar_value("eval/loss", 2.5 / (1 + step)))
            out.write(record(event(step, summary(*values))))
            out.flush()
            print("step %d loss %s" % (step, loss), flush=True)
            time.sleep(args.step_ms / 1000.0)


if __name__ == "__main__":
    main()
