# Fill the disk through the build cache, which the run may write but whose size no quota holds
# (only the disk's reserve does); bounded at 512 MiB so that a broken sandbox fails the test by its
# time limit, not by filling the machine.
import os
import time

chunk = os.urandom(1 << 20)
os.makedirs("__TARGET__", exist_ok=True)
for index in range(512):
    try:
        with open(os.path.join("__TARGET__", f"fill_{index}.bin"), "wb") as handle:
            handle.write(chunk)
    except OSError:
        pass
time.sleep(600)
