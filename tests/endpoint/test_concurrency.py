"""AIMD moves the in-flight bound within its limits; the pool picks the least-loaded endpoint."""

import asyncio

from eagle3_core.endpoint.concurrency import AimdController, Endpoint, EndpointPool


def test_fixed_concurrency_never_moves():
    controller = AimdController(16, max_concurrency=128)
    for _ in range(100):
        controller.on_success(0.1)
    controller.on_timeout()
    assert controller.slots == 16


def test_auto_grows_on_success_up_to_the_maximum():
    controller = AimdController(None, max_concurrency=32)
    start = controller.slots
    for _ in range(500):
        controller.on_success(0.1)
    assert start < controller.slots == 32


def test_auto_halves_on_a_timeout_and_never_drops_below_one():
    controller = AimdController(None, max_concurrency=64)
    for _ in range(200):
        controller.on_success(0.01)
    before = controller.slots
    controller.on_timeout()
    assert controller.slots == before // 2
    for _ in range(20):
        controller._last_decrease = 0.0  # each timeout from a new overload episode
        controller.on_timeout()
    assert controller.slots == 1
    assert [limit for _, limit in controller.timeline][-1] == 1


def test_auto_shrinks_when_latency_climbs_far_above_the_best():
    controller = AimdController(None, max_concurrency=64, latency_factor=2.0)
    for _ in range(100):
        controller.on_success(0.01)
    before = controller.slots
    for _ in range(30):
        controller.on_success(1.0)
    assert controller.slots < before


def test_pool_gives_the_next_request_to_the_least_loaded_endpoint():
    async def scenario():
        pool = EndpointPool([Endpoint("a", AimdController(4, 4)), Endpoint("b", AimdController(4, 4))])
        taken = [await pool.acquire() for _ in range(6)]
        return [e.url for e in taken], [e.in_flight for e in pool.endpoints]

    urls, in_flight = asyncio.run(scenario())
    assert sorted(urls) == ["a", "a", "a", "b", "b", "b"]
    assert in_flight == [3, 3]
