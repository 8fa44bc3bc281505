"""Prints FLOOD_LINES lines of 53 bytes as fast as it can (no distributed calls)."""

import os
import sys

rank = int(os.environ["RANK"])
count = int(os.environ.get("FLOOD_LINES", "1000000"))
write = sys.stdout.write
for i in range(count):
    write(f"rank {rank} line {i:09d} {'x' * (53 - 26 - len(str(rank)))}\n")
sys.stdout.flush()
