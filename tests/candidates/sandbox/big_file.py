# One file that grows without end.
try:
    with open("big.bin", "wb") as handle:
        while True:
            handle.write(b"\0" * (1 << 20))
except OSError as exc:
    print("write stopped", exc)
