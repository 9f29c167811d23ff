"""Work off the UI thread: ``engine_worker`` and ``engine_client`` (the engine process driven
from a worker thread, and the window's handle on it), ``messages`` (their typed requests and
replies), ``chat_session`` (the conversation on screen, without Qt), ``jobs`` and
``job_thread`` (typed background jobs on a worker thread), ``hub_jobs``, ``calibration`` and
``hub_worker`` (the wizard's Hub, download and calibration jobs and their threads),
``remote_runs`` (a chat answer from a remote server) and ``window_serving`` (the window's
engine behind "Serve on localhost")."""
