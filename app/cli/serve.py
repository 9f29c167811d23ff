"""``python -m app serve``: an OpenAI-compatible HTTP server for a pair on SpecDeck's engine.

The model options are ``generate``'s; the sampling options become the defaults for
requests that leave a field out (a request without ``seed`` gets a fresh one unless
``--seed`` is given).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.cli.options import (
    add_model_options,
    add_sampling_options,
    model_specs,
    sampler_config,
    spec_config,
)

API_KEY_VAR = "SPECDECK_API_KEY"


def register(subparsers: Any) -> None:
    from app.serve.defaults import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_QUEUE

    serve = subparsers.add_parser(
        "serve", help="OpenAI-compatible HTTP server for a pair (127.0.0.1 by default)"
    )
    add_model_options(serve)
    add_sampling_options(serve, max_tokens=512)
    serve.set_defaults(seed=None, func=cmd_serve)
    serve.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (0: any free one)")
    serve.add_argument(
        "--api-key",
        default=None,
        help=f"require 'Authorization: Bearer KEY' (or set {API_KEY_VAR}); "
        "needed for any address other than loopback",
    )
    serve.add_argument(
        "--queue",
        type=int,
        default=DEFAULT_QUEUE,
        help="requests that may wait for the engine; more get 429",
    )
    serve.add_argument("--alias", default=None, help="model id clients see (default: file name)")


def cmd_serve(args: argparse.Namespace) -> int:
    from app.engine.process.host import LoadRequest
    from app.serve.cli_serving import CliServing
    from app.serve.http import build_app
    from app.serve.params import Sampling
    from app.serve.server import Binding, bind, host_names, run, url_of

    if args.queue < 1:
        raise ValueError("--queue must be at least 1")
    api_key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_VAR) or None
    target, draft, source = model_specs(args)  # the options, checked before the port is taken
    sock = bind(Binding(args.host, args.port, api_key))
    defaults = Sampling(**asdict(sampler_config(args)), max_tokens=args.max_tokens)
    serving = CliServing(
        LoadRequest(target, draft, source),
        spec_config(args),
        queue_size=args.queue,
        ignore_eos=args.ignore_eos,
    )
    try:
        info = serving.start()
        model = args.alias or Path(target.path).name
        meta = {
            "target": Path(info.target_path).name,
            "draft": Path(info.draft_path).name if info.draft_path else None,
            "draft_source": info.draft_source.value,
            "n_ctx": info.n_ctx,
            "device": info.device,
        }
        app = build_app(
            serving,
            model=model,
            defaults=defaults,
            hosts=host_names(args.host, sock.getsockname()[1]),
            api_key=api_key,
            meta=meta,
        )
        announcement = (
            f"serving {model} on {url_of(sock)} ({info.device}; queue {args.queue}"
            f"{'; API key required' if api_key else ''}). Ctrl+C stops."
        )
        run(
            app,
            sock,
            concurrency=max(64, 4 * args.queue),
            announce=lambda: print(announcement, flush=True),
        )
    except KeyboardInterrupt:  # Ctrl+C while the pair loads
        pass
    finally:
        sock.close()
        serving.close()
    print("stopped", file=sys.stderr)
    return 0
