"""The offline chain loop: lossless greedy decoding and vLLM's bookkeeping."""

import pytest

from eagle3_core.stages.evaluate.metrics import SpecCounters
from eagle3_core.stages.evaluate.offline import ChainDecoder, run_offline


@pytest.fixture(scope="module")
def decoder(tiny_target, random_export):
    return ChainDecoder.load(tiny_target, random_export)


def plain_greedy(model, prompt, max_tokens):
    import torch

    ids = list(prompt)
    with torch.inference_mode():
        for _ in range(max_tokens):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt) :]


@pytest.mark.parametrize("k", [1, 3])
def test_speculative_output_equals_plain_greedy_output_of_the_target(decoder, k):
    prompt = [5, 17, 42, 8, 9, 60]
    counters = SpecCounters()
    completion = decoder.decode(prompt, k=k, max_tokens=24, counters=counters)
    assert completion == plain_greedy(decoder.target, prompt, 24)


def test_every_verification_is_counted_once_with_k_draft_tokens(decoder):
    result = run_offline(decoder, [[1, 2, 3], [40, 41]], k=3, max_tokens=30)
    c = result.counters
    assert c.draft_tokens == 3 * c.drafts
    # Each verification emits accepted + 1 tokens; the prefill emits one more per prompt.
    emitted = sum(len(x) for x in result.completions)
    assert emitted <= c.drafts + c.accepted + 2
    assert emitted > c.drafts + c.accepted + 2 - 2 * 4  # at most k+1 cut at max_tokens per prompt
    per_pos = c.per_position(3)
    assert per_pos == sorted(per_pos, reverse=True)
    assert 1.0 <= c.acceptance_length <= 4.0


def reference_counters(decoder, prompt, k, max_tokens):
    """The loop without any cache: target and drafter recomputed over everything each round."""
    import torch

    from eagle3_core.drafter.model import KVCache

    def target(ids):
        out = decoder.target(torch.tensor([ids]), output_hidden_states=True)
        return out.logits[0].argmax(-1).tolist(), torch.cat([out.hidden_states[i][0] for i in decoder.aux_ids], -1)

    def propose(seq, aux):
        n, cache, drafter = len(seq), KVCache(), decoder.drafter
        out = drafter(
            torch.tensor([seq[1:]]), drafter.combine(aux[None, : n - 1]), torch.arange(n - 1)[None], cache=cache
        )
        drafts = []
        for step in range(k):
            drafts.append(int(drafter.to_target_ids(out.logits[0, -1].argmax())))
            out = drafter(torch.tensor([[drafts[-1]]]), out.hidden[:, -1:], torch.tensor([[n - 1 + step]]), cache=cache)
        return drafts

    counters = SpecCounters()
    with torch.inference_mode():
        greedy, aux = target(prompt)
        seq = list(prompt) + [greedy[-1]]
        while len(seq) - len(prompt) < max_tokens:
            drafts = propose(seq, aux)
            greedy, aux_all = target(seq + drafts)
            verdicts = greedy[len(seq) - 1 :]
            a = next((i for i, (d, t) in enumerate(zip(drafts, verdicts)) if d != t), k)
            counters.record_step(k, a)
            aux = aux_all[: len(seq) + a]
            seq += drafts[:a] + [verdicts[a]]
    return counters


def test_the_cached_loop_drafts_exactly_what_a_full_recompute_drafts(tiny_target, tmp_path):
    """A drafter that agrees with the target now and then, so accepted counts are not all zero."""
    from tests.stages.evaluate.models import make_export

    found = []
    for seed in range(3):
        decoder = ChainDecoder.load(tiny_target, make_export(tmp_path / f"e{seed}", tiny_target, seed=seed))
        for prompt in ([5, 17, 42, 8], [70, 3, 3, 3, 3]):
            cached = SpecCounters()
            decoder.decode(prompt, k=3, max_tokens=24, counters=cached)
            full = reference_counters(decoder, prompt, 3, 24)
            assert (cached.drafts, cached.accepted, cached.accepted_per_pos) == (
                full.drafts,
                full.accepted,
                full.accepted_per_pos,
            )
            found.append(cached.accepted)
    assert any(found), "no draft was ever accepted: the comparison proved nothing"


def test_held_out_prompts_render_with_the_recipes_chat_template_kwargs(chat_target):
    """The server renders with target.chat's template variables (generate and evaluate send them):
    the offline loop must see the same prompt, or it measures another distribution."""
    from transformers import AutoTokenizer

    from eagle3_core.stages.evaluate.offline import prompt_token_ids
    from eagle3_core.target.config import ChatSettings

    prompts = [[{"role": "user", "content": "What is 3 + 2?"}]]
    chat = ChatSettings(chat_template_kwargs={"thinking": False})
    (ids,) = prompt_token_ids(chat_target, prompts, chat)
    tokenizer = AutoTokenizer.from_pretrained(str(chat_target))
    assert tokenizer.decode(ids).endswith("<think></think>")  # the template's non-thinking prompt
    (default,) = prompt_token_ids(chat_target, prompts)
    assert tokenizer.decode(default).endswith("<think>")


@pytest.mark.parametrize("kind", ["eagle3", "dflash"])
def test_on_a_gpu_the_target_loads_in_bf16_and_the_fp32_drafter_reads_its_states(
    tiny_target, tmp_path, monkeypatch, kind
):
    """A GPU's placement (bf16) on the CPU: ``placement`` is patched, standing in for the GPU this
    machine lacks, so the dtypes a GPU run mixes are exercised here (the device itself is not)."""
    from eagle3_core.stages.evaluate import offline
    from eagle3_core.stages.evaluate.buckets import measure_by_context
    from tests.stages.evaluate.models import make_dflash_export, make_export

    monkeypatch.setattr(offline, "placement", lambda: ("cpu", "bfloat16"))
    export = (make_export if kind == "eagle3" else make_dflash_export)(tmp_path / "export", tiny_target)
    decoder = ChainDecoder.load(tiny_target, export, threads=1)
    assert next(decoder.target.parameters()).dtype.is_floating_point and decoder.drafter_dtype.itemsize == 4
    assert str(next(decoder.target.parameters()).dtype) == "torch.bfloat16"
    counters = SpecCounters()
    answer = decoder.decode([5, 17, 42, 8], k=3, max_tokens=12, counters=counters)
    assert len(answer) == 12 and counters.drafts > 0
    assert measure_by_context(decoder, [[5, 17, 42, 8]], [answer], [8], [1, 3])[3].total().drafts > 0
