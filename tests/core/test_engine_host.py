"""The engine process (app.engine.process.host): real spawned children running real llama.cpp."""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from app.devtools.test_models.synthetic import TinyShape, write_tiny_llama
from app.engine.chat_template import ChatFormatter, ChatTemplateError, Message
from app.engine.config import DraftSource, GenerationRequest, ModelSpec
from app.engine.events import RunSummary, TokenEvent
from app.engine.process.child import child_main
from app.engine.process.host import (
    EngineCrashed,
    EngineHost,
    EngineUnresponsive,
    LoadRequest,
    describe_exit,
)
from app.engine.process.logs import new_log
from app.engine.process.protocol import (
    PROCESS_NAME,
    CancelFlag,
    ChildLaunch,
    CloseRequest,
    FailedReply,
    PlainChatRequest,
)
from app.errors import ContextOverflowError, GenerationCancelled
from tests.crash_ggufs import write_bert_tokenizer_llama, write_hung_template_llama
from tests.processes import (
    engine_processes,
    gone,
    host_summary,
    kill_all,
    run_app,
    seconds_until_gone,
)

ROOT = Path(__file__).resolve().parents[2]


def _spec(path: Path, n_ctx: int = 1024) -> ModelSpec:
    return ModelSpec(str(path), n_ctx=n_ctx, n_threads=1)


@pytest.fixture
def host():
    engine_host = EngineHost()
    yield engine_host
    engine_host.close()


def test_exit_codes_in_words() -> None:
    assert describe_exit(-signal.SIGSEGV) == "SIGSEGV (segmentation fault)"
    assert describe_exit(-signal.SIGABRT) == "SIGABRT (llama.cpp assertion)"
    assert describe_exit(-signal.SIGKILL) == "killed (out of memory?)"
    assert describe_exit(3) in ("exit code 3", "abort (llama.cpp assertion)")
    assert describe_exit(None) == "ended without an exit code"


def test_answers_stream_in_batches_and_match_in_process_engine(host, tiny_pair) -> None:
    from app.engine.engine import Engine

    target, draft = tiny_pair
    seen: list[tuple[str, float]] = []
    info = host.load(
        LoadRequest(_spec(target), _spec(draft)),
        on_progress=lambda path, f: seen.append((Path(path).name, f)),
    )
    assert host.pid not in (None, os.getpid())
    assert info.draft_path == str(draft) and info.weights_bytes > 0
    for name in ("target.gguf", "draft.gguf"):  # real llama.cpp progress, 0 .. 1 per file
        fractions = [f for n, f in seen if n == name]
        assert fractions[0] == 0.0 and fractions[-1] == 1.0 and len(fractions) > 2
        assert fractions == sorted(fractions)
    prompt = host.tokenize_chat([{"role": "user", "content": "hello the model"}])
    request = GenerationRequest(prompt, max_tokens=200, ignore_eos=True)
    batches = list(host.generate(request))
    events = [e for b in batches for e in b]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    summary = events[-1]
    assert isinstance(summary, RunSummary) and len(tokens) == summary.tokens == 200
    assert len(batches) < len(tokens)  # batched, not one message per token

    local = Engine(_spec(target), _spec(draft))
    try:
        assert local.tokenize_chat([Message("user", "hello the model")]) == prompt
        expected = [e for e in local.generate(request) if isinstance(e, RunSummary)][0]
    finally:
        local.close()
    assert summary.token_ids == expected.token_ids and summary.text == expected.text
    comparison = host.compare(prompt, summary.token_ids, summary.token_ids)
    assert comparison.identical

    with pytest.raises(ContextOverflowError) as overflow:  # typed errors cross the pipe
        host_summary(host, GenerationRequest(tuple(range(3, 1100)), max_tokens=4))
    assert overflow.value.n_ctx == 1024


def test_each_engine_process_starts_with_the_parents_environment_of_its_start(
    tiny_pair, monkeypatch, tmp_path
) -> None:
    """Engine processes are forked from a server started with the first one; each still
    sees the environment and working directory its parent has when it starts, as a spawned
    process would (the repacking override is read in the engine)."""
    from app.engine.llama.repacking import ENV_VAR

    first, second = EngineHost(), EngineHost()
    try:
        monkeypatch.setenv(ENV_VAR, "off")
        said = first.load(LoadRequest(_spec(tiny_pair[0]), None, DraftSource.NGRAM)).repacking
        assert f"forced off by ${ENV_VAR}" in said
        monkeypatch.setenv(ENV_VAR, "on")
        monkeypatch.chdir(tmp_path)
        said = second.load(LoadRequest(_spec(tiny_pair[0]), None, DraftSource.NGRAM)).repacking
        assert f"forced on by ${ENV_VAR}" in said
        engine = psutil.Process(second.pid)  # named by now, as ps and top show it
        assert engine.name() == "specdeck-engine" and engine.cwd() == str(tmp_path)
    finally:
        first.close()
        second.close()


def test_cancel_stops_an_answer_within_one_step(host, tiny_pair) -> None:
    host.load(LoadRequest(_spec(tiny_pair[0], 4096), _spec(tiny_pair[1], 4096)))
    prompt = host.tokenize_chat([{"role": "user", "content": "hello"}])
    stream = host.generate(GenerationRequest(prompt, max_tokens=3000, ignore_eos=True))
    # after a token: a cancel before the first one stops the prompt's reading instead (it
    # raised "stopped while reading the prompt" where the host read the prefill's batch
    # before the child had taken its first step, on a busy machine)
    while not any(isinstance(e, TokenEvent) for e in next(stream)):
        pass
    host.cancel()
    events = [e for b in stream for e in b]
    summary = events[-1]
    assert isinstance(summary, RunSummary) and summary.stop_reason.value == "cancelled"
    assert summary.tokens < 3000


def test_loading_can_be_cancelled_and_the_host_stays_usable(host, tiny_pair) -> None:
    def cancel_at_half(_path: str, fraction: float) -> None:
        if fraction >= 0.4:
            host.cancel()

    with pytest.raises(GenerationCancelled, match=r"loading (target|draft)\.gguf was cancelled"):
        host.load(LoadRequest(_spec(tiny_pair[0]), _spec(tiny_pair[1])), on_progress=cancel_at_half)
    # no pair from the cancelled load; the child lives on where it saw the cancel in time,
    # and ended where it had finished first (the next test), a race on a busy machine
    assert host.info is None
    host.reset_cancel()
    host.load(LoadRequest(_spec(tiny_pair[0]), None, DraftSource.NGRAM))
    prompt = host.tokenize_chat([{"role": "user", "content": "hello"}])
    assert host_summary(host, GenerationRequest(prompt, max_tokens=8)).tokens > 0


def test_a_cancel_the_child_sees_too_late_still_cancels_the_load(host, tiny_pair) -> None:
    """Cancelled after the last file's last progress, once the child no longer looks: it
    finishes the load, and the host honours the cancel all the same (the pair freed with
    the child, whose next load starts another). Before, the load succeeded whenever the host
    read a progress message only after the child had finished (one core, a busy machine)."""
    seen: list[str] = []

    def cancel_at_the_end(path: str, fraction: float) -> None:
        if path not in seen:
            seen.append(path)
        if len(seen) == 2 and fraction >= 1.0:
            time.sleep(0.5)  # the child finishes the tiny pair meanwhile, no longer looking
            host.cancel()

    with pytest.raises(GenerationCancelled, match=r"loading draft\.gguf was cancelled"):
        host.load(
            LoadRequest(_spec(tiny_pair[0]), _spec(tiny_pair[1])), on_progress=cancel_at_the_end
        )
    assert len(seen) == 2 and host.info is None and not host.alive
    host.reset_cancel()
    host.load(LoadRequest(_spec(tiny_pair[0]), None, DraftSource.NGRAM))
    prompt = host.tokenize_chat([{"role": "user", "content": "hello"}])
    assert host_summary(host, GenerationRequest(prompt, max_tokens=8)).tokens > 0


def test_a_long_prefill_stops_on_cancel_and_the_cache_stays_consistent(host, tmp_path) -> None:
    shape = TinyShape(n_embd=256, n_layer=4, n_head=4, n_head_kv=4, n_ff=1024, n_ctx=4096)
    wide = write_tiny_llama(tmp_path / "wide.gguf", seed=3, shape=shape)
    host.load(LoadRequest(_spec(wide, 4096), None, DraftSource.NGRAM))
    short = host.tokenize_chat([{"role": "user", "content": "hello the model"}])
    first = host_summary(host, GenerationRequest(short, max_tokens=16, ignore_eos=True))
    long_prompt = host.tokenize_chat([{"role": "user", "content": "the model " * 300}])
    assert len(long_prompt) > 2500  # about 2.4 s of prefill on one thread

    timer = threading.Timer(0.3, host.cancel)
    began = time.perf_counter()
    timer.start()
    with pytest.raises(GenerationCancelled):
        host_summary(host, GenerationRequest(long_prompt, max_tokens=4))
    assert time.perf_counter() - began < 1.5
    host.reset_cancel()
    again = host_summary(host, GenerationRequest(short, max_tokens=16, ignore_eos=True))
    assert again.token_ids == first.token_ids  # nothing from the aborted prefill lingers


def test_broken_template_raises_a_typed_error_and_plain_format_works(host, tmp_path) -> None:
    failing = write_tiny_llama(
        tmp_path / "raises.gguf", seed=1, chat_template="{{ raise_exception('no chat for you') }}"
    )
    host.load(LoadRequest(_spec(failing), None, DraftSource.NGRAM))
    with pytest.raises(ChatTemplateError, match="broken chat template in raises.gguf"):
        host.tokenize_chat([{"role": "user", "content": "hi"}])
    host.use_plain_chat()
    assert host.info is not None and host.info.plain_chat
    assert len(host.tokenize_chat([{"role": "user", "content": "hi"}])) > 2

    formatter = ChatFormatter("{% for %}", bos_text="<s>", eos_text="</s>")
    with pytest.raises(ChatTemplateError, match="does not compile"):
        formatter.render([Message("user", "hi")])
    formatter.use_plain()
    assert formatter.render([Message("user", "hi")]) == "user: hi\nassistant:"


def test_killed_child_raises_engine_crashed_with_stage(host, tiny_pair) -> None:
    host.load(LoadRequest(_spec(tiny_pair[0], 4096), _spec(tiny_pair[1], 4096)))
    prompt = host.tokenize_chat([{"role": "user", "content": "hello"}])
    stream = host.generate(GenerationRequest(prompt, max_tokens=3000, ignore_eos=True))
    next(stream)
    host.kill()
    with pytest.raises(EngineCrashed) as crash:
        for _ in stream:
            pass
    assert crash.value.stage == "generating" and "target.gguf + draft.gguf" in crash.value.model
    assert not host.alive
    host.load(LoadRequest(_spec(tiny_pair[0]), _spec(tiny_pair[1])))  # a fresh child
    assert host.alive
    host.kill()  # dies while idle: the next request says so, in words
    deadline = time.monotonic() + 10
    while host.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(EngineCrashed) as idle:
        host.tokenize_chat([{"role": "user", "content": "hello"}])
    assert idle.value.stage == "idle" and idle.value.how == "killed (out of memory?)"


def test_gguf_that_aborts_llama_cpp_is_reported_not_fatal(host, tmp_path) -> None:
    bad = write_bert_tokenizer_llama(tmp_path / "bert-vocab.gguf")
    with pytest.raises(EngineCrashed) as crash:
        host.load(LoadRequest(_spec(bad), None, DraftSource.NGRAM))
    assert crash.value.stage == "loading" and crash.value.model == "bert-vocab.gguf"
    if os.name != "nt":
        assert crash.value.how == "SIGABRT (llama.cpp assertion)"
    assert "bert-vocab.gguf" in str(crash.value) and "died" in str(crash.value)
    assert "not supported by this llama.cpp build" in str(crash.value)


@pytest.mark.parametrize("command", ["generate", "bench"])
def test_cli_reports_a_crashing_gguf_as_an_error_naming_it(command, tmp_path) -> None:
    bad = write_bert_tokenizer_llama(tmp_path / "bert-vocab.gguf")
    args = [sys.executable, "-m", "app", command, "--target", str(bad), "--ngram", "--threads", "1"]
    if command == "bench":
        prompts = tmp_path / "p.jsonl"
        prompts.write_text('{"id": "a", "prompt": "hi"}\n')
        args += ["--prompts", str(prompts), "--json", str(tmp_path / "out.json")]
    else:
        args.append("hi")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    said = "error: the engine process (llama.cpp) died while loading bert-vocab.gguf"
    assert said in done.stderr
    assert "Segmentation fault" not in done.stderr and "core dumped" not in done.stderr


def test_the_pipe_costs_well_under_the_per_token_budget(tiny_pair) -> None:
    from app.devtools.latency_probe import measure_pipe_cost
    from app.engine.engine import Engine

    engine = Engine(_spec(tiny_pair[0], 2048), _spec(tiny_pair[1], 2048))
    try:
        prompt = engine.tokenize_chat([Message("user", "hello the model")])
        events = list(engine.generate(GenerationRequest(prompt, max_tokens=1000, ignore_eos=True)))[
            :-1
        ]
    finally:
        engine.close()
    cost = measure_pipe_cost(events, rounds=3)
    # budget: 0.05 ms per token for the whole boundary (measured ~0.007 + ~0.002 here)
    assert cost["pipe_child_ms_per_token"] + cost["pipe_parent_cpu_ms_per_token"] < 0.05, cost


def test_the_child_reads_its_launch_and_writes_native_output_to_its_log(tmp_path) -> None:
    """``child_main`` started by hand from one ``ChildLaunch``, as ``EngineHost`` starts it
    (its log handed over open, without a name where that can be done)."""
    context = multiprocessing.get_context("spawn")
    parent_end, child_end = context.Pipe(duplex=True)
    log = new_log(tmp_path)
    launch = ChildLaunch(child_end, CancelFlag(), log.for_child())
    process = context.Process(target=child_main, args=(launch,), name=PROCESS_NAME)
    process.start()
    child_end.close()
    try:
        parent_end.send((7, PlainChatRequest()))
        assert parent_end.poll(60), "the child never answered"
        seq, reply = parent_end.recv()
        assert seq == 7 and isinstance(reply, FailedReply)
        assert "No model pair is loaded" in reply.message
        if os.name != "nt":  # faulthandler's report of the abort goes to the launch's log
            os.kill(process.pid, signal.SIGABRT)
            process.join(30)
            assert process.exitcode == -signal.SIGABRT
            assert "Fatal Python error" in log.tail(1 << 16)
        else:
            parent_end.send((0, CloseRequest()))
            process.join(30)
            assert process.exitcode == 0
    finally:
        if process.is_alive():
            process.kill()
        process.join(5)
        parent_end.close()
        log.close()
    assert list(tmp_path.glob("specdeck-engine-*")) == []


def test_bench_holds_each_chat_template_render_to_the_chats_bound(tmp_path) -> None:
    """The benchmark renders its prompts in the engine process; a template that loops for ever
    ends the run with the chat's message within the chat's bound (5 s), not never."""
    hung = write_hung_template_llama(tmp_path / "hung-template.gguf")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "prompt": "hi"}\n')
    done, seconds = run_app(
        ["bench", "--target", str(hung), "--ngram", "--threads", "1", "--prompts", str(prompts),
         "--json", str(tmp_path / "out.json")],
        timeout_s=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    said = "error: broken chat template in hung-template.gguf: rendering did not finish within 5 s"
    assert said in done.stderr
    assert seconds < 60  # start-up and load, then the 5 s bound
    assert not (tmp_path / "out.json").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
@pytest.mark.parametrize("command", ["generate", "bench"])
def test_the_engine_process_dies_with_its_parent(command, tiny_pair, tmp_path) -> None:
    """A SIGKILLed ``generate``/``bench`` leaves no engine process running, even while the
    engine is in a long stretch with nothing to send (a baseline run, a benchmark prompt)."""
    target, draft = tiny_pair
    args = [sys.executable, "-m", "app", command, "--target", str(target), "--draft", str(draft),
            "--threads", "1", "--ignore-eos", "--ctx", "4096"]  # fmt: skip
    if command == "bench":  # about 5 s per prompt here, each sent when it is done
        prompts = tmp_path / "p.jsonl"
        prompts.write_text("".join(f'{{"id": "p{i}", "prompt": "hello {i}"}}\n' for i in range(3)))
        args += ["--max-tokens", "1000", "--prompts", str(prompts),
                 "--json", str(tmp_path / "out.json")]  # fmt: skip
        busy = "p0: "  # the first prompt's row: the engine works on the next one
    else:  # the streamed answer, then the unstreamed baseline (3.5-15 s here)
        args += ["--max-tokens", "4000", "--compare", "--no-colour", "hello the model"]
        busy = "[speculative]"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, text=True,
    )  # fmt: skip
    engines = []
    try:
        assert parent.stdout is not None
        deadline = time.monotonic() + 180
        seen = ""
        # read the pipe itself: a buffered readline() may hold the awaited line back in its
        # buffer while select() waits for more bytes (seconds later, the engine long done)
        fd = parent.stdout.fileno()
        while busy not in seen and time.monotonic() < deadline and parent.poll() is None:
            if select.select([fd], [], [], 1.0)[0]:
                seen += os.read(fd, 1 << 16).decode("utf-8", errors="replace")
        assert busy in seen and parent.poll() is None, seen[-2000:]
        # the engine is into the next stretch: on a quiet machine the tiny pair's 4,000-token
        # baseline takes about 3.5 s, so look now, not a second later
        time.sleep(0.2)
        engines = engine_processes(parent.pid)
        assert len(engines) == 1
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        took = seconds_until_gone(engines[0], 10.0)
        assert took is not None, "the engine process outlived its parent by 10 s and more"
        assert took < 2.0
    finally:
        kill_all(engines)
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(10)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP is POSIX")
def test_a_load_the_engine_process_ignores_is_ended_by_cancel(host, tiny_pair) -> None:
    """An engine process stopped mid-load (SIGSTOP: as if stuck in native code) is killed
    once Cancel has gone unanswered for the grace, and the next load starts a fresh one."""
    target, draft = tiny_pair
    host.load(LoadRequest(_spec(target), _spec(draft)))
    stuck = psutil.Process(host.pid)
    host.stop_grace_s = 1.0  # the real grace is 10 s
    outcome: dict[str, object] = {}

    def load() -> None:
        try:
            host.load(LoadRequest(_spec(target), None, DraftSource.NGRAM))
        except BaseException as error:  # noqa: BLE001 - examined below
            outcome["error"] = error
        outcome["at"] = time.monotonic()

    os.kill(stuck.pid, signal.SIGSTOP)
    loading = threading.Thread(target=load, daemon=True)
    loading.start()
    time.sleep(0.5)
    assert loading.is_alive()  # the load waits on a process that cannot answer
    cancelled = time.monotonic()
    host.cancel()
    loading.join(20)
    if loading.is_alive():
        stuck.kill()
        loading.join(10)
        pytest.fail("Cancel did not end a load the engine process ignored (20 s)")
    error = outcome.get("error")
    assert isinstance(error, EngineUnresponsive), error
    assert float(outcome["at"]) - cancelled < 3.0  # type: ignore[arg-type]
    assert "did not respond to Cancel within 1 s while loading target.gguf" in str(error)
    assert gone(stuck) and not host.alive
    host.reset_cancel()
    info = host.load(LoadRequest(_spec(target), _spec(draft)))  # another pair loads
    assert info.draft_path == str(draft) and host.pid not in (None, stuck.pid)
    prompt = host.tokenize_chat([{"role": "user", "content": "hello"}])
    assert host.run(GenerationRequest(prompt, max_tokens=8)).tokens > 0
