"""The offline chain loop: lossless greedy decoding and vLLM's bookkeeping."""

import pytest

from eagle3_core.evaluate.metrics import SpecCounters
from eagle3_core.evaluate.offline import ChainDecoder, run_offline


@pytest.fixture(scope="module")
def decoder(tiny_target, random_export):
    return ChainDecoder(tiny_target, random_export)


def plain_greedy(model, prompt, max_tokens):
    import torch

    ids = list(prompt)
    with torch.inference_mode():
        for _ in range(max_tokens):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt):]


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
