"""Pure-Python parts of the engine: sampling, n-gram lookup, text stream, pair compatibility."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.config import SamplerConfig
from app.engine.drafters.lookup import copied_fraction, propose
from app.engine.loop.textstream import TextStream
from app.engine.sampling import (
    _top_k_ids,
    distribution,
    residual,
    top_probability,
    top_two_margin,
)
from app.gguf.compat import IncompatiblePairError, VocabInfo, check_compatible, first_mismatch

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def test_distribution_matches_brute_force_filters() -> None:
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(50).astype(np.float32) * 2
    config = SamplerConfig(temperature=0.7, top_k=20, top_p=0.8, min_p=0.05)
    dist = distribution(logits, config)
    order = np.argsort(-logits)[:20]
    p = np.exp(logits[order] - logits[order][0])
    p /= p.sum()
    keep = int(np.searchsorted(np.cumsum(p), 0.8)) + 1
    keep = min(keep, int(np.sum(p >= 0.05 * p[0])))
    survivors = order[:keep]
    expected = np.exp((logits[survivors] - logits[survivors][0]) / 0.7)
    expected /= expected.sum()
    assert list(dist.ids) == list(survivors)
    np.testing.assert_allclose(dist.probs, expected, rtol=1e-6)


def test_residual_removes_draft_mass() -> None:
    p = distribution(
        np.array([2.0, 1.0, 0.0, -1.0], dtype=np.float32),
        SamplerConfig(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0),
    )
    q = distribution(
        np.array([0.0, 3.0, 0.0, -1.0], dtype=np.float32),
        SamplerConfig(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0),
    )
    r = residual(p, q, 4)
    dense_p, dense_q = p.dense(4), q.dense(4)
    expected = np.maximum(dense_p - dense_q, 0)
    expected /= expected.sum()
    np.testing.assert_allclose(r.dense(4), expected, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_sparse_residual_equals_the_dense_definition(seed: int) -> None:
    """Same ids in the same (ascending) order and the same probabilities as a dense pass over
    the vocabulary, so a given uniform number picks the same token."""
    rng = np.random.default_rng(seed)
    n_vocab = 5000
    config = SamplerConfig(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05)
    p = distribution(rng.normal(0, 3, n_vocab).astype(np.float32), config)
    draft_logits = rng.normal(0, 3, n_vocab + 64).astype(np.float32)
    draft_logits[n_vocab + 3] = 40.0  # the draft's own extra token, outside the target's vocab
    draft_logits[p.ids[:5]] += 6.0  # overlap with the target's support
    q = distribution(draft_logits, config)
    got = residual(p, q, n_vocab)
    dense = p.dense(n_vocab)
    inside = q.ids < n_vocab
    dense[q.ids[inside]] -= q.probs[inside]
    np.maximum(dense, 0.0, out=dense)
    ids = np.flatnonzero(dense)
    np.testing.assert_array_equal(got.ids, ids)
    np.testing.assert_allclose(got.probs, dense[ids] / dense[ids].sum(), rtol=1e-12, atol=0)
    for u in rng.random(50):
        assert got.sample(float(u)) == int(ids[_draw_index(dense[ids], float(u))])


def _draw_index(probs: np.ndarray, uniform: float) -> int:
    cumulative = np.cumsum(probs)
    return min(
        int(np.searchsorted(cumulative, uniform * cumulative[-1], side="right")), probs.size - 1
    )


def test_top_two_margin() -> None:
    best, second, margin = top_two_margin(np.array([0.1, 3.0, 2.5, -1.0], dtype=np.float32))
    assert (best, second) == (1, 2)
    assert margin == pytest.approx(0.5)


@pytest.mark.parametrize("peak", [-200.0, -30.0, 0.0, 12.0, 59.0, 61.0, 250.0])
@pytest.mark.parametrize("scale", [0.1, 3.0, 30.0])
def test_top_probability_matches_float64_softmax(peak: float, scale: float) -> None:
    """Flat and peaked rows of a real vocabulary's size, with the peak on both sides of the
    range where exp() runs without shifting by the peak."""
    rng = np.random.default_rng(abs(int(peak * 7 + scale * 3)))
    row = (rng.standard_normal(151_936) * scale).astype(np.float32)
    best = 4321
    row[best] = row.max() + 2.0
    row += np.float32(peak - row[best])
    exact = 1.0 / np.exp(row.astype(np.float64) - float(row[best])).sum()
    assert top_probability(row, best) == pytest.approx(exact, rel=2e-5)
    assert top_probability(row) == pytest.approx(exact, rel=2e-5)
    small = np.array([1.0, 3.0, 2.0], dtype=np.float32)  # a shorter row after a longer one
    assert top_probability(small, 1) == pytest.approx(1 / (1 + np.exp(-2) + np.exp(-1)))


@pytest.mark.parametrize("shape", ["flat", "peaked", "ties", "few-high", "nan"])
@pytest.mark.parametrize("k", [1, 40, 300, 5000])
def test_top_k_ids_are_exactly_the_k_largest(shape: str, k: int) -> None:
    rng = np.random.default_rng(k)
    n = 151_936
    row = rng.standard_normal(n).astype(np.float32)
    if shape == "peaked":
        row = row * 4
        row[rng.integers(0, n, 50)] += 20
    elif shape == "ties":
        row = np.round(row).astype(np.float32)  # a handful of distinct values, huge ties
    elif shape == "few-high":
        row[:3] = 100.0  # fewer than k far above the rest: the sample's threshold misses
    elif shape == "nan":
        row[::1000] = np.nan
    ids = _top_k_ids(row, k)
    assert len(ids) == k == len(set(ids.tolist()))
    clean = np.nan_to_num(row, nan=np.inf)  # NaN ranks above everything, as in argpartition
    kth = np.sort(clean)[-k]
    chosen = clean[ids]
    assert np.all(chosen >= kth)  # nothing below the k-th largest value …
    assert np.count_nonzero(clean > kth) <= np.count_nonzero(chosen > kth)  # … all above it


def test_ngram_proposes_continuation_of_latest_match() -> None:
    tokens = [1, 2, 3, 4, 9, 2, 3, 5, 7, 2, 3]
    assert propose(tokens, max_n=3, k=2) == [5, 7]
    assert propose([1, 2, 3], max_n=3, k=4) == []
    assert propose(tokens, max_n=3, k=0) == []


def test_a_repeating_run_is_continued_for_the_whole_block_not_one_token() -> None:
    """The most recent match of a run's suffix ends one period before the end: its
    continuation goes on over itself, as the run does."""
    assert propose([5, 248, 248, 248], max_n=3, k=4) == [248] * 4
    assert propose([9, 1, 2, 1, 2, 1, 2], max_n=3, k=5) == [1, 2, 1, 2, 1]
    assert propose([9, 1, 2, 1, 2, 1, 2], max_n=3, k=1) == [1]


def test_text_stream_joins_split_utf8() -> None:
    data = "é😀".encode()
    stream = TextStream()
    out = [stream.push(data[i : i + 1]) for i in range(len(data))]
    assert "".join(out) == "é😀"
    assert out[0] == "" and out[1] == "é"  # nothing half-drawn
    assert all(o == "" for o in out[2:5]) and out[5] == "😀"


def test_text_stream_replaces_broken_bytes_and_ends_a_cut_character_as_one_replacement() -> None:
    stream = TextStream()
    assert stream.push(b"a\xff") == "a\ufffd"  # never valid: replaced at once
    assert stream.push(b"b\xe2\x82") == "b"  # the start of a character: held back
    assert stream.push(b"\xac!") == "\u20ac!"  # and finished by the next token
    assert stream.push(b"\xe2\x82") == ""
    assert stream.flush() == "\ufffd"  # the answer ended inside it
    assert stream.text == "a\ufffdb\u20ac!\ufffd"


def test_text_stream_holds_back_stop_prefix() -> None:
    stream = TextStream(stop=["</end>"])
    assert stream.push(b"hello </e") == "hello "
    assert stream.push(b"nd> more") == ""
    assert stream.stopped and stream.text == "hello "
    other = TextStream(stop=["</end>"])
    other.push(b"a </e")
    assert other.push(b"x") == "</ex"


def _vocab(tokens: list[str], **kw: object) -> VocabInfo:
    base = dict(vocab_type="bpe", add_bos=False, add_eos=False, bos_id=1, eos_id=2)
    base.update(kw)
    return VocabInfo(tokens=tokens, **base)  # type: ignore[arg-type]


def test_compat_names_first_mismatching_token() -> None:
    a = [f"t{i}" for i in range(300)]
    b = list(a)
    b[200] = "<｜User｜>"
    assert first_mismatch(_vocab(a), _vocab(a)) is None
    with pytest.raises(IncompatiblePairError, match="token 200: target 't200', draft '<｜User｜>'"):
        check_compatible(_vocab(a), _vocab(b))
    assert "add_bos" in (first_mismatch(_vocab(a), _vocab(a, add_bos=True)) or "")
    assert "vocabulary size" in (first_mismatch(_vocab(a), _vocab(a + ["x"] * 129)) or "")
    assert first_mismatch(_vocab(a), _vocab(a + ["x"] * 100)) is None
    b[3] = "different below id 5 is allowed"
    b[200] = "t200"
    assert first_mismatch(_vocab(a), _vocab(b)) is None


def test_compat_compares_bos_and_eos_ids_only_where_the_token_is_added() -> None:
    """llama.cpp's rule (common/speculative.cpp): a draft whose EOS id differs drafts for a
    target that adds no EOS (most do not), as Qwen2.5 base and instruct models do."""
    a = [f"t{i}" for i in range(300)]
    assert first_mismatch(_vocab(a), _vocab(a, eos_id=7)) is None
    assert first_mismatch(_vocab(a), _vocab(a, bos_id=7)) is None
    added = {"add_bos": True, "add_eos": True}
    assert "EOS token id" in (
        first_mismatch(_vocab(a, **added), _vocab(a, **added, eos_id=7)) or ""
    )
    assert "BOS token id" in (
        first_mismatch(_vocab(a, **added), _vocab(a, **added, bos_id=7)) or ""
    )


def test_ngram_index_proposes_exactly_what_the_scan_does() -> None:
    from app.engine.drafters.lookup import NgramIndex, propose

    rng = np.random.default_rng(3)
    for trial in range(40):
        alphabet = int(rng.integers(2, 9))
        tokens = [int(t) for t in rng.integers(0, alphabet, size=int(rng.integers(1, 120)))]
        index = NgramIndex(3)
        # grow the sequence the way the engine does, asking at every length
        for end in range(1, len(tokens) + 1):
            prefix = tokens[:end]
            for min_n in (1, 2):
                assert index.propose(prefix, k=5, min_n=min_n) == propose(
                    prefix, max_n=3, k=5, min_n=min_n
                ), (trial, end, min_n)
    # a different sequence (a new request) is re-indexed, not mixed with the old one
    index = NgramIndex(3)
    assert index.propose([1, 2, 3, 1, 2], k=3) == [3, 1, 2]
    assert index.propose([7, 8, 9, 7], k=2) == [8, 9]


def test_each_setting_is_described_once_and_completely() -> None:
    from dataclasses import fields

    from app.store.settings import FIELDS, PARSERS, Settings

    names = [f.name for f in fields(Settings)]
    assert list(FIELDS) == names  # one entry per field, in the dataclass's order
    assert all(info.label for info in FIELDS.values())
    assert {name: info.parse for name, info in FIELDS.items()} == PARSERS


def test_sizes_have_one_formatter_each_and_free_space_one_probe(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Sizes in one unit system, binary and labelled as such (a file's size is set against
    the memory it needs); free space where a models folder is or will be (its nearest
    existing parent)."""
    import shutil
    from types import SimpleNamespace

    from app.models.downloads import free_bytes
    from app.models.fit import gib

    assert gib(491_400_064) == "469 MiB"
    assert gib(999) == "999 B"
    assert gib(348.7 * 2**20) == "349 MiB" and gib(2.7 * 2**30) == "2.7 GiB"
    # a tiny model or cache is not "0 MiB"
    assert gib(300 * 2**10) == "300 KiB" and gib(512) == "512 B" and gib(0) == "0 MiB"
    asked: list[str] = []

    def usage(path: str) -> SimpleNamespace:
        asked.append(path)
        return SimpleNamespace(free=12345)

    not_yet = tmp_path / "models" / "acme--Repo"
    assert free_bytes(not_yet, usage) == 12345
    assert asked == [str(tmp_path)]
    assert free_bytes(tmp_path) == shutil.disk_usage(tmp_path).free


def test_an_answer_is_copied_where_it_repeats_runs_of_the_prompt_not_single_words() -> None:
    source = list(range(100))
    edit = list(range(10, 30)) + [500, 501] + list(range(32, 50))  # a copy with one change
    assert copied_fraction(source, edit) == pytest.approx(38 / 40)
    # the same tokens in another order: no run of 8 is in the prompt
    shuffled = [t for pair in zip(range(0, 40, 2), range(41, 81, 2), strict=True) for t in pair]
    assert copied_fraction(source, shuffled) == 0.0
    assert copied_fraction(source, list(range(5))) == 0.0  # shorter than a run
    assert copied_fraction(source, []) == 0.0


def test_a_copy_is_followed_past_suffixes_that_repeat_elsewhere() -> None:
    """A command list: every line is "python -m app VERB" and a newline, so the three tokens
    before a verb occur on every line. Copying the list, the most recent occurrence proposes
    the last line's verb; the cursor proposes the line after the one copied."""
    from app.engine.drafters.lookup import NgramIndex

    nl, run, bench, serve, gen = 5, 10, 20, 30, 40  # "python -m app" is 1 2 3
    listing = [1, 2, 3, run, nl, 1, 2, 3, bench, nl, 1, 2, 3, serve, nl, 1, 2, 3, gen, nl]
    index = NgramIndex(3)
    assert index.follow([*listing, 99, 1], k=3) == [2, 3, gen]  # nothing copied yet
    assert index.follow([*listing, 99, 1, 2, 3, run], k=4) == [nl, 1, 2, 3]
    committed = [*listing, 99, 1, 2, 3, run, nl, 1, 2]  # the copy reached the second line
    assert index.propose(committed, k=3) == [3, gen, nl]  # the most recent "\n 1 2"
    assert index.follow(committed, k=3) == [3, bench, nl]  # the line being copied
    # an edit breaks the copy: the lookup falls back to the most recent match
    edited = [*committed, 3, 77, nl, 1, 2]
    assert index.follow(edited, k=2) == index.propose(edited, k=2) == [3, 77]


def test_a_prefix_known_to_agree_is_not_compared_again() -> None:
    from app.engine.sequences import common_prefix_length

    cached = list(range(600)) + [7, 8, 9]
    for committed in (list(range(600)) + [7, 8], list(range(600)) + [7, 1], list(range(300))):
        full = common_prefix_length(cached, committed)
        for known in (0, 1, 255, 256, 299, min(full, 600)):
            assert common_prefix_length(cached, committed, known=min(known, full)) == full
    assert common_prefix_length((1, 2, 3), [1, 2, 4]) == 2  # a tuple beside a list
