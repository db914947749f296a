# Fill the disk with many files in the work directory (each under the file-size limit); bounded at
# 4 GiB so that a broken sandbox fails the test by its time limit, not by filling the machine.
import os
import time

chunk = os.urandom(1 << 20)
for index in range(4096):
    try:
        with open(f"fill_{index}.bin", "wb") as handle:
            handle.write(chunk)
    except OSError:
        pass
time.sleep(600)
