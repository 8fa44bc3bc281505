"""Two ranks that report the same device (cuda:0), through the runtime's heartbeat API:
what a GPU job with a wrong LOCAL_RANK / visible-device override looks like to distrun."""

import os
import time

from distrun.runtime.heartbeat import Heartbeat

rank = int(os.environ["RANK"])
hb = Heartbeat(os.environ["DISTRUN_RUN_DIR"], rank)
hb.joined("cuda:0", int(os.environ["LOCAL_RANK"]), 0)
for step in range(1, 25):
    hb.beat(step, {"loss": 1.0 / step})
    time.sleep(0.1)
hb.close()
