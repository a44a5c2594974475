"""The HTTP API behind :mod:`toolguard.http`, which re-exports its public names.

From the ground up (a module imports only the ones before it):

* ``answers``: the security headers, error bodies, and toolguard's errors as status codes;
* ``parsing``: the body limits and the checks that refuse hostile JSON before it is parsed;
* ``schemas``: the request and response models;
* ``guards``: what is refused before a route runs: other ``Host`` headers, cross-site writes,
  bodies that are not JSON or too large (the route class of the router, the app's middleware);
* ``live``: the pending reviews, as a listing and as a live stream of server-sent events;
* ``routes``: the router of the chat's routes (:func:`~toolguard.http.create_router`);
* ``app``: the one factory of toolguard's apps (:func:`~toolguard.http.create_app`,
  ``toolguard serve``, ``toolguard mcp-proxy``).
"""

try:
    import fastapi  # noqa: F401  (fail here, with a hint, when the extra is missing)
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = 'toolguard.http needs FastAPI: pip install "toolguard-hitl[http]"'
    raise ImportError(msg) from exc
