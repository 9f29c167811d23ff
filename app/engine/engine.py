"""The speculative decoding engine: one target, an optional draft, events out.

Each verification step has five visible stages: draft a block, score it with the target in one
``llama_decode`` batch that returns logits for every position, accept the valid prefix,
resample at the first failure, and continue from the accepted state with both KV caches rolled
back. Target-only decoding (the baseline) runs through the same loop with no drafts, on its own
context over the same loaded weights, so the two runs are comparable token for token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Protocol

import numpy as np

from app.engine.chat_template import ChatFormatter, Message
from app.engine.config import DraftSource, GenerationRequest, ModelSpec, SamplerConfig, SpecConfig
from app.engine.drafters.base import Drafter, DraftingContext
from app.engine.drafters.combined import CombinedDrafter
from app.engine.drafters.dflash import BlockHead, DFlashDrafter
from app.engine.drafters.eagle3 import Eagle3Drafter, Eagle3Head
from app.engine.drafters.lookup import NgramDrafter
from app.engine.drafters.model import ModelDrafter
from app.engine.drafters.mtp import MtpDrafter, NextTokenHeads
from app.engine.events import Event, PrefillEvent, StopReason, TextTail
from app.engine.llama.backend import (
    RECURRENT_ROLLBACK,
    LlamaContext,
    LlamaModel,
    SamplesRows,
    sample_with,
)
from app.engine.loop.acceptance import Verifier
from app.engine.loop.answer_writer import AnswerWriter
from app.engine.loop.drafting_turn import DraftingTurn
from app.engine.loop.run_clock import DecodeTimed, RunClock
from app.engine.loop.textstream import TextStream
from app.engine.policy.calibration import ConfidenceCalibration
from app.engine.policy.controller import DraftController
from app.engine.policy.costs import CostModel
from app.engine.policy.guard import GuardMemory
from app.engine.randomness import Randomness
from app.engine.step_record import StepRecord
from app.engine.thread_fit import (
    OtherProgramsMeter,
    ThreadGovernor,
    others_busy,
    unmeasured_fit,
    with_threads,
)
from app.errors import ContextOverflowError, ModelLoadError
from app.gguf.check import validate_gguf_file
from app.gguf.compat import check_compatible
from app.gguf.facts import SelfDrafting, model_facts
from app.gguf.reader import GGUFHeader

CancelCheck = Callable[[], bool]
WARM_UP_TIMED = 3  # timed single passes per model after loading: the fastest is its first price
# on a GPU, the batch sizes run once each after loading: a default block's verifications
WARM_UP_BATCHES = range(2, SpecConfig.draft_max + 2)


def declared_drafting(path: Path) -> tuple[SelfDrafting, GGUFHeader]:
    """How a GGUF's header says it drafts: its method ("mtp", "assistant", …, "" for none)
    and a block drafter's block; with the header, checked."""
    header = validate_gguf_file(path)
    return model_facts(header).drafting, header


def _fastest_warm_up(pass_ms: Callable[[], float]) -> float:
    """One untimed run of ``pass_ms`` (it returns its own milliseconds), then the fastest of
    WARM_UP_TIMED: runs a few milliseconds apart are one moment, so one price."""
    pass_ms()
    return min(pass_ms() for _ in range(WARM_UP_TIMED))


def _warm_up_pass_ms(ctx: LlamaContext, row: np.ndarray | None, at: int | None) -> float:
    """One pass over the model's warm-up token, in ms; the cache is left empty."""
    began = time.perf_counter()
    ctx.decode([ctx.model.warm_up_token], logits="last", rows=row, at=at)
    ms = (time.perf_counter() - began) * 1000.0
    ctx.truncate(0)
    return ms


def _never() -> bool:
    return False


class _RunPart(DecodeTimed, SamplesRows, Protocol):
    """A context a run decodes with: timed by the run's clock, sampled with its chain."""


class Engine:
    """Owns the llama.cpp models and contexts. Not thread-safe: one worker drives it."""

    def __init__(
        self,
        target: ModelSpec,
        draft: ModelSpec | None = None,
        *,
        draft_source: DraftSource | None = None,
        threads: OtherProgramsMeter | None = None,
    ) -> None:
        """``threads``: a window on the machine, started before this load, that fits the
        passes' threads to the cores other programs leave free (None: every core)."""
        self.target_spec = target
        self.draft_spec = draft
        self.draft_source = draft_source or (DraftSource.MODEL if draft else DraftSource.NGRAM)
        self_drafting = self.draft_source is DraftSource.MTP
        # a Gemma 4 style assistant is a second file that drafts from the target's hidden rows
        drafting: SelfDrafting | None = None
        draft_header: GGUFHeader | None = None
        if draft is not None and self.draft_source is DraftSource.MODEL:
            drafting, draft_header = declared_drafting(Path(draft.path))
        method = drafting.method if drafting is not None else ""
        assistant, eagle3 = method == "assistant", method == "eagle3"
        block = drafting.block if drafting is not None else None
        if method and not (assistant or eagle3 or block is not None):
            raise ModelLoadError(
                f"{Path(draft.path).name if draft else 'the draft'} is a {method} head, which "
                "this SpecDeck cannot draft with yet: choose a draft model, MTP or n-gram"
            )
        # threads left to SpecDeck follow other programs between steps, as at load
        left_to_specdeck = target.n_threads <= 0 and (draft is None or draft.n_threads <= 0)
        follow = threads if left_to_specdeck else None
        self.target = LlamaModel(target, load_next_token_layers=self_drafting)
        # read after the target's weights, just before its contexts: the window spans the load
        self.thread_fit = threads.fit(target) if threads is not None else unmeasured_fit(target)
        target = self.target_spec = with_threads(target, self.thread_fit)
        if draft is not None:
            draft = self.draft_spec = with_threads(draft, self.thread_fit)
        self.draft: LlamaModel | None = None
        self.draft_ctx: LlamaContext | None = None
        self.heads: NextTokenHeads | None = None
        self.eagle3: Eagle3Head | None = None
        self.block_head: BlockHead | None = None
        try:
            if self_drafting and self.target.n_layer_nextn <= 0:
                raise ModelLoadError(
                    f"{self.target.path.name} has no next-token (MTP) layers, so it cannot "
                    "draft for itself: choose a draft model or n-gram drafting"
                )
            self.spec_ctx = LlamaContext(
                self.target,
                target,
                n_rs_seq=RECURRENT_ROLLBACK,
                next_token_rows=self_drafting or assistant,
            )
            if self_drafting:
                self.heads = NextTokenHeads(self.target, self.spec_ctx, target)
            elif assistant and draft is not None:
                self.heads = NextTokenHeads(
                    self._load_draft(draft, draft_header), self.spec_ctx, draft, assistant=True
                )
            elif eagle3 and draft is not None:
                self.eagle3 = Eagle3Head(
                    self._load_draft(draft, draft_header), self.spec_ctx, draft
                )
            elif block is not None and draft is not None:
                self.block_head = BlockHead(
                    self._load_draft(draft, draft_header), self.spec_ctx, draft, block
                )
            if draft is not None and self.draft_source is DraftSource.MODEL and not method:
                self.draft_ctx = LlamaContext(
                    self._load_draft(draft, draft_header), replace(draft, n_ctx=target.n_ctx)
                )
        except BaseException:
            self.close()
            raise
        self._base_ctx: LlamaContext | None = None
        self.governor = None
        if follow is not None:
            self.governor = ThreadGovernor(follow, self.thread_fit.cores, self.thread_fit.threads)
            self.thread_fit = replace(self.thread_fit, follows=True)
        # properties of the pair and the device, so they outlive a request
        self.costs = CostModel()
        self._warm_up()
        self.calibration = ConfidenceCalibration()
        self._guard_memory: dict[str, GuardMemory | None] = {}
        # the cores other programs kept busy during the last answer: the cost lines' latest
        # prices were taken then
        self._last_outside_cores: float | None = None
        # the draft's passes were last priced in an answer that ran while other programs kept
        # half a core or more busy: a paused draft is not priced again until it drafts, so a
        # burst's price outlives the burst (a Q2_K draft at 1.8 of its target's pass)
        self.draft_priced_busy = False
        bos = self.target.token_text(self.target.bos) if self.target.add_bos else ""
        eos = self.target.token_text(self.target.eos)
        self.formatter = ChatFormatter(self.target.chat_template(), bos_text=bos, eos_text=eos)

    def _load_draft(self, draft: ModelSpec, header: GGUFHeader | None) -> LlamaModel:
        """The draft's weights (``header``: as checked when its method was read), refused when
        its vocabulary is not the target's."""
        spec = replace(draft, n_ctx=self.target_spec.n_ctx)
        self.draft = LlamaModel(spec, header=header)
        check_compatible(self.target.vocab_info(), self.draft.vocab_info())
        return self.draft

    # --- lifecycle ----------------------------------------------------------------------

    def _warm_up(self) -> None:
        """One throw-away pass per model, as llama.cpp does after loading, then a few timed.

        The first pulls every memory-mapped weight page in and allocates compute buffers, so
        the first answer's timings describe the steady state rather than disk reads. The
        timed ones are the first price of a single pass of each model: without them the
        first answer's cost lines knew only blocks of 16 or so and extrapolated a single
        target pass from them, once to a microsecond, and the guard paused a draft that pays.
        They run a few milliseconds apart, one moment: a burst of other programs slows them
        all, so each model files one price, the fastest of them. Filed as three, a burst at
        load outvoted the answer's own lone pass in the cell's median (16.8 ms against a
        quiet 8.6): a draft as dear as its target then looked as if it paid against that
        price, and nothing measured a single target pass again while it drafted.
        """
        for batched in (self.spec_ctx, self.draft_ctx):
            if batched is not None and batched.model.layers_on_gpu:
                self._warm_up_batches(batched)
        heads = self.heads.ctx if self.heads is not None else None
        for ctx in (self.spec_ctx, self.draft_ctx, heads):
            if ctx is None:
                continue
            row = np.zeros((1, ctx.model.n_embd_out), np.float32) if ctx is heads else None
            # an assistant keeps no cache of its own: it decodes at a position, records none
            at = 0 if self.heads is not None and self.heads.shared and ctx is heads else None
            ms = _fastest_warm_up(partial(_warm_up_pass_ms, ctx, row, at))
            if ctx is self.spec_ctx:
                self.costs.observe_verify(1, ms, depth=0)
            else:
                self.costs.observe_draft_pass(1, ms, depth=0)
        if self.eagle3 is not None:
            self.costs.observe_draft_pass(1, _fastest_warm_up(self._eagle3_seed_pass), depth=0)
        if self.block_head is not None:
            self._warm_up_block_head(self.block_head)

    def _warm_up_batches(self, ctx: LlamaContext) -> None:
        """One untimed pass of each batch size a default block's verification (the target) or
        catch-up (a draft model) takes. On a GPU a size's first pass loads the kernels chosen
        for it: the first GPU check's cost lines priced verifying 2 tokens of the fast pair at
        7.7 single passes, 17 at 20, from the first answer's steps, and the guard never
        drafted. Nothing is filed: the steps price them. (On a CPU a size's first pass costs
        at most 1.13 times its later ones, and the passes would add seconds to a load.)"""
        token = ctx.model.warm_up_token
        for n_tokens in WARM_UP_BATCHES:
            ctx.decode([token] * n_tokens, logits="all" if ctx is self.spec_ctx else "last")
            ctx.truncate(0)

    def _warm_up_block_head(self, head: BlockHead) -> None:
        """A block after one target token, as a draft does; each drafted position is filed
        as its share of the pass (``DFlashDrafter``). The head's cache is left empty."""
        token = self.target.warm_up_token

        def share_of_block() -> float:
            self.spec_ctx.decode([token], logits="none")
            began = time.perf_counter()
            drafted, _ = head.draft(token, 1, head.max_draft, confidences=False)
            share = (time.perf_counter() - began) * 1000.0 / max(len(drafted), 1)
            self.spec_ctx.truncate(0)
            return share

        self.costs.observe_draft_pass(1, _fastest_warm_up(share_of_block), depth=0)
        head.forget()

    def _eagle3_seed_pass(self) -> float:
        """The EAGLE-3 head's seed pass, in ms: it reads the target's rows of the position
        before it."""
        assert self.eagle3 is not None
        token = self.target.warm_up_token
        self.spec_ctx.decode([token], logits="none")
        began = time.perf_counter()
        self.eagle3.first([token, token])
        ms = (time.perf_counter() - began) * 1000.0
        self.spec_ctx.truncate(0)
        return ms

    def close(self) -> None:
        # the heads before the contexts they read, the contexts before their models; a part
        # a failed load never made is not there
        for name in (
            "heads",
            "eagle3",
            "block_head",
            "_base_ctx",
            "draft_ctx",
            "spec_ctx",
            "draft",
            "target",
        ):
            part = getattr(self, name, None)
            if part is not None:
                part.close()

    @property
    def base_ctx(self) -> LlamaContext:
        """Target-only context, created on first use; it shares the target's weights."""
        if self._base_ctx is None:
            self._base_ctx = LlamaContext(self.target, self.target_spec)
            if self.governor is not None:
                self._base_ctx.set_threads(self.governor.threads)
        return self._base_ctx

    def _follow_other_programs(self) -> None:
        """The next passes' threads: the cores other programs leave free now."""
        threads = self.governor.tick() if self.governor is not None else None
        if threads is None:
            return
        heads = self.heads.ctx if self.heads is not None else None
        parts = (self.spec_ctx, self._base_ctx, self.draft_ctx, heads, self.eagle3)
        for part in (*parts, self.block_head):
            if part is not None:
                part.set_threads(threads)

    @property
    def n_ctx(self) -> int:
        return self.spec_ctx.n_ctx

    # --- prompts ------------------------------------------------------------------------

    def render_chat(self, messages: Sequence[Message | dict]) -> str:
        typed = [
            m if isinstance(m, Message) else Message(m["role"], m["content"]) for m in messages
        ]
        return self.formatter.render(typed)

    def tokenize_rendered(self, prompt: str) -> tuple[int, ...]:
        """Tokens of a rendered chat prompt (special tokens parsed, BOS added once)."""
        add_bos = self.target.add_bos and not self.formatter.starts_with_bos(prompt)
        return tuple(self.target.tokenize(prompt, add_special=add_bos, parse_special=True))

    def tokenize_chat(self, messages: Sequence[Message | dict]) -> tuple[int, ...]:
        return self.tokenize_rendered(self.render_chat(messages))

    def tokenize(self, text: str) -> tuple[int, ...]:
        return tuple(self.target.tokenize(text, add_special=self.target.add_bos))

    # --- generation ---------------------------------------------------------------------

    def _drafter(self, request: GenerationRequest, randomness: Randomness) -> Drafter:
        context = DraftingContext(
            sampler=request.sampler,
            spec=request.spec,
            randomness=randomness,
            costs=self.costs,
            calibration=self.calibration,
            target_vocab=self.target.n_vocab,
            want_probs=request.token_probs,
        )
        model: Drafter
        if self.eagle3 is not None:
            model = Eagle3Drafter(self.eagle3, context)
        elif self.block_head is not None:
            model = DFlashDrafter(self.block_head, context)
        elif self.heads is not None:
            model = MtpDrafter(self.heads, context)
        elif self.draft_ctx is not None and self.draft_source is DraftSource.MODEL:
            model = ModelDrafter(self.draft_ctx, context)
        else:
            return NgramDrafter(request.spec, costs=self.costs)
        if not request.spec.ngram_first:
            return model
        lookup = NgramDrafter(request.spec, min_match=2, costs=self.costs)
        return CombinedDrafter(lookup, model, self.costs)

    def _forget_prompts(self, ctx: LlamaContext) -> None:
        """Empty the run's caches (the target's, the draft model's, the heads' own), as a
        prompt that shares nothing with the last would: an EAGLE-3 head and a block drafter
        follow the target."""
        ctx.truncate(0)
        if self.draft_ctx is not None:
            self.draft_ctx.truncate(0)
        if self.heads is not None and not self.heads.shared:
            self.heads.ctx.truncate(0)

    def generate(self, request: GenerationRequest, cancel: CancelCheck = _never) -> Iterator[Event]:
        """Run one request; yields events and ends with a ``RunSummary``."""
        prompt = list(request.prompt_tokens)
        if not prompt:
            raise ValueError("the prompt is empty")
        ctx = self.spec_ctx if request.speculative else self.base_ctx
        if len(prompt) + 1 > ctx.n_ctx:
            raise ContextOverflowError(len(prompt) + 1, ctx.n_ctx)
        if self.governor is not None:
            self.governor.begin()
        self._follow_other_programs()
        helpers: list[_RunPart | None] = [
            self.draft_ctx,
            self.heads.ctx if self.heads is not None else None,
            self.eagle3,
            self.block_head,
        ]
        contexts: list[_RunPart] = [ctx]
        contexts += [c for c in helpers if request.speculative and c is not None]
        clock = RunClock(contexts, mode="speculative" if request.speculative else "baseline")
        sampler = request.sampler
        randomness = Randomness(sampler.seed, position_keyed=sampler.position_keyed)
        sampling = sample_with(contexts, sampler)  # "device", or "host (why)"

        if not request.reuse_prefix:
            self._forget_prompts(ctx)
        ctx.truncate(min(ctx.common_prefix(prompt), len(prompt) - 1))
        reused = ctx.n_past
        ctx.decode(prompt[reused:-1], logits="none")
        ends_answer = None if request.ignore_eos else self.target.is_eog
        drafting = DraftingTurn(
            self._drafter(request, randomness) if request.speculative else None,
            DraftController(request.spec, self.costs, self.calibration),
            self.costs,
            ends_answer=ends_answer,
            memory=self._guard_memory,
        )
        _, during_prefill = clock.machine.read()
        noisy_costs = self.draft_priced_busy or others_busy(
            self._last_outside_cores, during_prefill
        )
        pause = drafting.prefill(prompt, busy_machine=noisy_costs)
        yield PrefillEvent(len(prompt), reused, clock.prefill_done())
        pause = drafting.opening_pause(pause, depth=len(prompt))
        if pause is not None:
            yield pause
        verifier = Verifier(
            self.target.n_vocab,
            sampler,
            randomness,
            request.spec.rule,
            want_probs=request.token_probs,
        )
        stream = TextStream(request.stop)
        committed = list(prompt)
        answer = AnswerWriter(
            self.target,
            committed,
            stream,
            clock,
            ends_answer=ends_answer,
            max_tokens=request.max_tokens,
        )
        records: list[StepRecord] = []
        stop = StopReason.MAX_TOKENS
        while True:
            remaining = request.max_tokens - (len(committed) - len(prompt))
            if remaining <= 0:
                break
            if cancel():
                stop = StopReason.CANCELLED
                break
            self._follow_other_programs()
            ctx.truncate(len(committed) - 1)
            if ctx.n_past < len(committed) - 1:  # a recurrent state that could not roll back
                ctx.decode(committed[ctx.n_past : -1], logits="none")
            room = ctx.n_ctx - ctx.n_past - 1
            if room < 0:
                stop = StopReason.CONTEXT_FULL
                break
            step, depth = len(records), len(committed)
            step_began = time.perf_counter()
            decode_before = clock.decode_s()

            # draft: at most what the answer and the context have room for, and no further
            # than a hybrid target rolls back
            cap = min(remaining - 1, room)
            if ctx.n_rs_seq > 0:
                cap = min(cap, ctx.n_rs_seq)
            paused = drafting.paused
            block = drafting.propose(committed, cap)
            drafts = block.tokens if block else []

            # verify
            verify_began = time.perf_counter()
            ctx.decode([committed[-1], *drafts], logits="all" if drafts else "last")
            verify_ms = (time.perf_counter() - verify_began) * 1000.0
            self.costs.observe_verify(len(drafts) + 1, verify_ms, depth)
            outcome = verifier.judge(ctx, block, depth)

            # accept
            finished = yield from answer.write(outcome, step)

            # record: one step, one record, read by everything after it
            record = StepRecord.of(
                step,
                drafting.name,
                block,
                outcome,
                depth=depth,
                emitted=len(committed) - depth,
                verify_ms=verify_ms,
                step_ms=(time.perf_counter() - step_began) * 1000.0,
                decode_ms=(clock.decode_s() - decode_before) * 1000.0,
                paused=paused,
            )
            records.append(record)
            learning_began, decode_before = time.perf_counter(), clock.decode_s()
            yield from drafting.learn(record, block, last=finished is not None)
            clock.learned(learning_began, decode_before)
            if finished is not None:
                stop = finished
                break
        tail = stream.flush()
        if tail:
            yield TextTail(tail)
        summary = clock.summary(
            stop,
            stream.text,
            committed[len(prompt) :],
            records,
            drafting.pauses,
            position_keyed=sampler.position_keyed and not sampler.greedy,
            temperature=sampler.temperature,
            rule=request.spec.rule.value if request.speculative else "",
            sampling=sampling,
        )
        governor = self.governor
        if governor is not None and governor.fewest < self.thread_fit.threads:
            summary = replace(summary, fewest_threads=governor.fewest)
        self._last_outside_cores = summary.outside_cores
        ran_busy = others_busy(during_prefill, summary.outside_cores)
        drafting.finish(busy_machine=ran_busy)
        if summary.draft_passes:
            self.draft_priced_busy = ran_busy
        yield summary

    # --- exactness ------------------------------------------------------------------------

    def target_margin(self, tokens: Sequence[int]) -> tuple[int, int, float]:
        """Target's (best, second, logit margin) for the token after ``tokens``.

        Evaluated on the baseline context, reusing whatever prefix it already caches.
        """
        ctx = self.base_ctx
        if len(tokens) + 1 > ctx.n_ctx:
            raise ContextOverflowError(len(tokens) + 1, ctx.n_ctx)
        ctx.sample_with(SamplerConfig())  # greedy: its candidates hold the top two
        ctx.truncate(min(ctx.common_prefix(tokens), len(tokens) - 1))
        ctx.decode(list(tokens[ctx.n_past :]), logits="last")
        return ctx.row(-1).margin()
