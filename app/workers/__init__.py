"""Work off the UI thread: ``engine_worker`` and ``engine_client`` (the engine process driven
from a worker thread, and the window's handle on it), ``messages`` (their typed requests and
replies), ``chat_session`` (the conversation on screen, without Qt), ``hub_worker`` (the wizard's
Hub, download and calibration jobs), ``remote_runs`` (a chat answer from a remote server) and
``window_serving`` (the window's engine behind "Serve on localhost")."""
