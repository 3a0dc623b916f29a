"""The pages: GET / (the admin web page), GET /graphql (GraphiQL), GET /static/… (their
scripts, styles, GraphiQL and uPlot themselves, vendored) and GET /favicon.ico. They are
public; everything they show comes from POST /graphql with the admin's token."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

STATIC = Path(__file__).parents[1] / "static"


# CONTRACT §15 "Headers": the admin page and GraphiQL run scripts from this origin only
# (no inline script, no CDN: GraphiQL is vendored), talk to this origin only, and may not
# be framed. GraphiQL's CSS carries its fonts as data: URLs.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "font-src 'self' data:",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def add_page_routes(app: web.Application) -> None:
    app.router.add_get("/", _page("index.html"))
    app.router.add_get("/graphql", _page("graphiql.html"))
    app.router.add_get("/favicon.ico", _favicon)  # asked for by browsers whatever a page says
    app.router.add_get("/static/{name:.+}", _static_files())


def _page(name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    html = (STATIC / name).read_text()

    async def page(_: web.Request) -> web.Response:
        return web.Response(text=html, content_type="text/html", headers=SECURITY_HEADERS)

    return page


async def _favicon(_: web.Request) -> web.FileResponse:
    headers = {**SECURITY_HEADERS, "Cache-Control": "max-age=86400", "Content-Type": "image/x-icon"}
    return web.FileResponse(STATIC / "favicon.ico", headers=headers)


def _static_files() -> Callable[[web.Request], Awaitable[web.FileResponse]]:
    """The files under static/, looked up by name among those there at start (so no path
    can lead outside it); revalidated on each use (Last-Modified), as they change with
    releases."""
    files = {p.relative_to(STATIC).as_posix(): p for p in STATIC.rglob("*") if p.is_file()}
    headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}

    async def static_file(request: web.Request) -> web.FileResponse:
        path = files.get(request.match_info["name"])
        if path is None:
            raise web.HTTPNotFound()
        return web.FileResponse(path, headers=headers)

    return static_file
