"""Fake HTTP servers on 127.0.0.1 in a test's own process."""

# ``serve_forever``'s keyword arguments for a server a test stops: ``shutdown()`` waits for the
# serving loop's next look, which is half a second apart by default (1 s a test with two).
QUICK_STOP = {"poll_interval": 0.05}
