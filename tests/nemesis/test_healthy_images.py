"""The netns cluster is healthy only once every node's metadata image caught up
(``tests.support.netns_cluster.lagging_image``): a deposed leader whose first heartbeat
after a heal unfenced it, while its image still shows it leading, is not healthy yet.
Seed 5707520's final read went to such a node and read only up to its stale high
watermark."""
from __future__ import annotations

from tests.support.netns_cluster import lagging_image


def test_a_node_whose_image_stays_behind_is_named() -> None:
    asked: list[int] = []

    def again(i: int) -> int:
        asked.append(i)
        return 40

    reason = lagging_image({1: 40, 2: 57, 3: 57}, again)
    assert reason == "node 1's metadata image is at offset 40, behind 57"
    assert asked == [1]


def test_a_node_that_caught_up_when_asked_again_is_healthy() -> None:
    assert lagging_image({1: 40, 2: 57, 3: 57}, lambda i: 58) is None


def test_equal_images_need_no_second_ask() -> None:
    def again(i: int) -> int:
        raise AssertionError(f"node {i} asked again")

    assert lagging_image({1: 57, 2: 57, 3: 57}, again) is None
