"""A headless Chromium driven over the DevTools protocol: open a report page, check it, take a screenshot.

    python -m evals.report.browser PAGE.html SHOT.png [--width 1280] [--height 1800] [--scale 0.5] [--full-page]

Why a real browser: a page that parses is not a page that shows; only a browser says whether every
inline image decoded (naturalWidth > 0) and whether the table's script sorts. Chromium runs with
`--remote-debugging-port=0` and a private profile; the port comes from its DevToolsActivePort file,
the page is driven with websocket-client (the `report` extra). Nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
BROWSER_ENV = "STITCHCUDA_CHROMIUM"

PAGE_CHECK = """
(function () {
  var images = Array.prototype.slice.call(document.images);
  var rows = document.querySelectorAll('table#problems tbody tr').length;
  return JSON.stringify({
    images: images.length,
    loaded: images.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length,
    broken: images.filter(function (i) { return !(i.complete && i.naturalWidth > 0); }).map(function (i) { return i.alt; }),
    rows: rows,
    title: document.title
  });
})()
"""


class BrowserError(RuntimeError):
    """Chromium is missing, did not start, or the page did not answer."""


def find_browser() -> str | None:
    """$STITCHCUDA_CHROMIUM, else the first Chromium or Chrome on PATH."""
    env = os.environ.get(BROWSER_ENV)
    if env:
        return env
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


class Browser:
    """One headless Chromium with one page, closed on exit (its profile folder is removed)."""

    def __init__(
        self, width: int = 1280, height: int = 1800, scale: float = 1.0, timeout_s: float = 60.0
    ) -> None:
        self.width, self.height, self.scale, self.timeout_s = width, height, scale, timeout_s
        self.process: subprocess.Popen[bytes] | None = None
        self.profile = ""
        self.socket: Any = None
        self.next_id = 0

    def __enter__(self) -> Browser:
        binary = find_browser()
        if binary is None:
            raise BrowserError(f"no Chromium found (install it, or set ${BROWSER_ENV})")
        self.profile = tempfile.mkdtemp(prefix="stitchcuda-chromium-")
        command = [
            binary,
            "--headless=new",
            "--remote-debugging-port=0",
            f"--user-data-dir={self.profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--no-sandbox",  # CI runs as root, where Chromium's own sandbox refuses to start
            f"--window-size={self.width},{self.height}",
            "about:blank",
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self._connect()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _connect(self) -> None:
        import websocket

        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while not port_file.exists() or not port_file.read_text().strip():
            if self.process is not None and self.process.poll() is not None:
                raise BrowserError(f"Chromium exited with code {self.process.returncode} before it listened")
            if time.monotonic() > deadline:
                raise BrowserError("Chromium did not open its DevTools port in time")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            targets = json.loads(answer.read())
        page = next((t for t in targets if t.get("type") == "page"), None)
        if page is None:
            raise BrowserError("Chromium has no page target")
        # No Origin header: Chromium 111 and later refuse a DevTools socket from an origin they were
        # not started to allow (--remote-allow-origins), and a local client has no origin to name.
        self.socket = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=self.timeout_s, suppress_origin=True
        )
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=self.height,
            deviceScaleFactor=self.scale,
            mobile=False,
        )

    def __exit__(self, *exc: object) -> None:
        if self.socket is not None:
            self.socket.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events in between are skipped)."""
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def open(self, page: Path) -> None:
        """Load a file and wait until the document and every image have finished loading."""
        self.call("Page.navigate", url=page.resolve().as_uri())
        deadline = time.monotonic() + self.timeout_s
        ready = "document.readyState === 'complete' && Array.from(document.images).every(i => i.complete)"
        while not self.evaluate(ready):
            if time.monotonic() > deadline:
                raise BrowserError(f"{page}: did not finish loading")
            time.sleep(0.1)

    def check(self) -> dict[str, Any]:
        """Images (how many, how many decoded, which are broken), problem-table rows and the title."""
        return dict(json.loads(self.evaluate(PAGE_CHECK)))

    def page_size(self) -> tuple[int, int]:
        """The whole document's width and height in CSS pixels (not just the window's)."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        return int(size["width"]), int(size["height"])

    def screenshot(self, target: Path, full_page: bool = False) -> Path:
        """The window (width x height CSS pixels at the device scale) as PNG; with `full_page`, the whole
        document from top to bottom at the same width and scale."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            _, height = self.page_size()
            clip = {"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1}
            params |= {"clip": clip, "captureBeyondViewport": True}
        data = self.call("Page.captureScreenshot", **params)["data"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(data))
        return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.report.browser", description=__doc__.split("\n")[0]
    )
    parser.add_argument("page", help="a report.html")
    parser.add_argument("shot", help="where the screenshot (PNG) goes")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1800)
    parser.add_argument("--scale", type=float, default=1.0, help="device scale factor (0.5: a small image)")
    parser.add_argument(
        "--full-page", action="store_true", help="the whole page, not only the window's height"
    )
    args = parser.parse_args(argv)
    try:
        with Browser(args.width, args.height, args.scale) as browser:
            browser.open(Path(args.page))
            facts = browser.check()
            browser.screenshot(Path(args.shot), full_page=args.full_page)
    except BrowserError as exc:
        print(f"browser: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(facts))
    return 0 if facts["loaded"] == facts["images"] else 1


if __name__ == "__main__":
    sys.exit(main())
