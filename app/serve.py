"""The ASGI app ``python -m app`` serves: Streamlit over ``app/main.py``, with every page's URL
answered by an ``index.html`` that tells the browser where the server is.

Streamlit's frontend does not know the server's base path. Opened on a page's URL such as
``/replay``, it first asks ``/replay/_stcore/health`` (a 404), waits 100 ms and only then asks
``/_stcore/health``: every link to a page but the first paid that before the page's script
started (a fresh Replay tab reached the server 145 ms later, ``bench.dashboard_browser``).
Streamlit reads the base from ``window.__streamlit.BACKEND_BASE_URL`` when a host sets it, so
the page URLs here serve Streamlit's own ``index.html`` with that set to the URL's folder (which
holds under a ``server.baseUrlPath`` too). Everything else (scripts, the socket, health) is
Streamlit's; a page added to ``pages/`` without a route here still opens, through the probe.

``streamlit run app/serve.py`` finds :data:`app` and serves it with uvicorn, honouring the same
``--server.*`` and ``--runner.*`` flags as ``streamlit run app/main.py``. This file is loaded as
a top-level module by that command, so it imports nothing from ``app``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route
from streamlit.file_util import get_static_dir

HERE = Path(__file__).resolve().parent
ENTRY = HERE / "main.py"
PAGES = HERE.parent / "pages"
# Set before Streamlit's bundle runs: the folder of the page's URL is the server's base.
BASE_SCRIPT = ('<script>window.__streamlit = Object.assign(window.__streamlit || {}, '
               '{BACKEND_BASE_URL: new URL(".", window.location.href).href});</script>')


def index_html(static_html: str) -> str:
    """Streamlit's ``index.html`` with :data:`BASE_SCRIPT` first in its ``<head>``.

    Raises:
        ValueError: the page has no ``<head>`` (a Streamlit whose page this does not know).
    """
    if "<head>" not in static_html:
        raise ValueError("index.html: expected a <head> to put the base URL script in, found none")
    return static_html.replace("<head>", "<head>\n    " + BASE_SCRIPT, 1)


def page_paths(pages: Path = PAGES) -> list[str]:
    """The URL path of every page script in ``pages`` (its file name's stem, as
    ``st.Page`` names it), and ``/`` for the default page."""
    return ["/", *(f"/{script.stem}" for script in sorted(pages.glob("*.py")))]


def page_routes(html: str) -> list[Route]:
    """A route per page URL answering ``html``, never cached (it names no versioned file)."""

    async def index(request: Request) -> HTMLResponse:
        del request
        return HTMLResponse(html, headers={"Cache-Control": "no-cache"})

    return [Route(path, index, methods=["GET", "HEAD"]) for path in page_paths()]


app = st.App(
    str(ENTRY),
    routes=page_routes(index_html((Path(get_static_dir()) / "index.html").read_text())),
)
