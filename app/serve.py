"""The ASGI app ``python -m app`` serves: Streamlit over ``app/main.py``, with every page's URL
answered by an ``index.html`` that tells the browser where the server is.

Streamlit's frontend does not know the server's base path. Opened on a page's URL such as
``/replay``, it first asks ``/replay/_stcore/health`` (a 404), waits 100 ms and only then asks
``/_stcore/health``: every link to a page but the default one paid that before the page's
script started (a fresh Replay tab reached the server 145 ms later, ``bench.dashboard_browser``).
Streamlit takes the base from ``window.__streamlit.BACKEND_BASE_URL`` when a host sets it, so
each page's URL here serves Streamlit's own ``index.html`` with a script that sets it: the
URL's path without the page's name, so it holds under a ``server.baseUrlPath`` and behind a
proxy that moves the app to another prefix. Everything else (scripts, the socket, health, a URL
that names no page) is Streamlit's own; a page added to ``pages/`` gets its route here by its
file name, as ``st.Page`` names it.

``streamlit run app/serve.py`` finds :data:`app` and serves it with uvicorn; the
``--server.port``, ``--server.address``, ``--server.headless``, ``--server.fileWatcherType``
and ``--runner.*`` flags ``python -m app`` passes work as with ``streamlit run app/main.py``
(a Unix-socket address does not; the launcher never passes one). That command loads this file
as a top-level module, so it imports nothing from ``app``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import streamlit as st
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route
from streamlit import config
from streamlit.file_util import get_static_dir
from streamlit.source_util import page_icon_and_name
from streamlit.url_util import make_url_path

HERE = Path(__file__).resolve().parent
ENTRY = HERE / "main.py"
PAGES = HERE.parent / "pages"
# Run before Streamlit's bundle: the base is the page URL's path without the page's name.
BASE_SCRIPT = """<script>(function () {
      var page = %s, path = window.location.pathname;
      if (page && path.slice(-page.length - 1) === "/" + page) path = path.slice(0, -page.length);
      else if (path.slice(-1) !== "/") path += "/";
      window.__streamlit = Object.assign(window.__streamlit || {},
                                         {BACKEND_BASE_URL: window.location.origin + path});
    })();</script>"""


def base_script(page: str) -> str:
    """:data:`BASE_SCRIPT` for the page whose URL name is ``page`` ("" for the default)."""
    return BASE_SCRIPT % json.dumps(page)


def index_html(static_html: str, page: str) -> str:
    """Streamlit's ``index.html`` with :func:`base_script` of ``page`` first in its ``<head>``.

    Raises:
        ValueError: the page has no ``<head>`` (a Streamlit whose page this does not know).
    """
    if "<head>" not in static_html:
        raise ValueError("index.html: expected a <head> to put the base URL script in, found none")
    return static_html.replace("<head>", "<head>\n    " + base_script(page), 1)


def page_names(pages: Path = PAGES) -> list[str]:
    """Each page's name in its URL: "" for the default page, then each script's in ``pages``
    as ``st.Page`` derives it from the file name (``app/main.py`` sets no ``url_path``)."""
    return ["", *(page_icon_and_name(script)[1] for script in sorted(pages.glob("*.py")))]


def page_routes(static_html: str, base: str) -> list[Route]:
    """A route per page URL under the base path ``base`` (``server.baseUrlPath``), answering
    ``static_html`` with that page's base script, never cached (it names no versioned file)."""

    def answer(html: str) -> Callable[[Request], Awaitable[HTMLResponse]]:
        async def index(request: Request) -> HTMLResponse:
            del request
            return HTMLResponse(html, headers={"Cache-Control": "no-cache"})
        return index

    # Under a base path the default page is "/base/"; "/base" stays Streamlit's, which
    # redirects it there (its index.html names its scripts relative to the URL).
    return [Route(make_url_path(base, name), answer(index_html(static_html, name)),
                  methods=["GET", "HEAD"]) for name in page_names()]


app = st.App(
    str(ENTRY),
    routes=page_routes((Path(get_static_dir()) / "index.html").read_text(),
                       config.get_option("server.baseUrlPath") or ""),
)
