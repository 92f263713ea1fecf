"""Asking the workers: a start (the client's request in ``fd_starts``, and the
forwarder in each worker that starts the key's workflow), a stop or pause
(``fd_controls``), and the roles that decide who may ask (``grants``).
"""
