"""Policies as plug-ins from Python (issue 37): a policy whose hooks are Python callables."""

import pytest

import fraglab

G = fraglab.GFP
# A short pgbench run: by 10 s its writes of costly-order page-cache folios meet a full
# memory, where the variant changes what the allocator does.
PGBENCH = "example:pgbench-checkpoints"
SHORT = {"workload.duration": "10s"}


def v3_filemap_opportunistic(base, hint, order, min_order):
    """Seed 002's V3 (mm/filemap.c) in Python: above the mapping's minimum order every attempt
    drops __GFP_DIRECT_RECLAIM and adds __GFP_NOWARN; the minimum order keeps the mapping's gfp."""
    if order > min_order:
        return (base & ~G["DIRECT_RECLAIM"]) | G["NOWARN"]
    return base


def _without_policy(r):
    raw = dict(r.raw)
    raw.pop("wall_ns", None)
    return raw.pop("policy", None), raw


def test_a_python_policy_reproduces_the_rust_variant():
    fraglab.register_policy(
        "py-v3", summary="V3 in Python", pagecache_folio_gfp=v3_filemap_opportunistic
    )
    assert "py-v3" in set(fraglab.policies().name)
    rust = fraglab.run(PGBENCH, overrides={**SHORT, "model.costly_order_policy": "v3_filemap_opportunistic"})
    py = fraglab.run(PGBENCH, overrides={**SHORT, "model.policy": "py-v3"})
    base = fraglab.run(PGBENCH, overrides=SHORT)
    rust_policy, rust_raw = _without_policy(rust)
    py_policy, py_raw = _without_policy(py)
    assert rust_policy["name"] == "linux-6.18+costly_order_policy=v3_filemap_opportunistic"
    assert py_policy["name"] == "py-v3"
    assert py_raw == rust_raw
    # And the variant changes something here, so the equality above says something.
    _, base_raw = _without_policy(base)
    assert base_raw["vmstat_delta"] != rust_raw["vmstat_delta"]


def test_bad_hooks_and_names():
    with pytest.raises(TypeError, match="unknown policy hook"):
        fraglab.register_policy("py-bad", nope=lambda: True)
    with pytest.raises(TypeError, match="not callable"):
        fraglab.register_policy("py-bad", kswapd_wake_order=3)
    with pytest.raises(fraglab.FraglabError, match="built-in"):
        fraglab.register_policy("contiguitas", kswapd_wake_order=lambda m, o: o)
    with pytest.raises(fraglab.FraglabError, match="not a policy name"):
        fraglab.register_policy("Py Bad", kswapd_wake_order=lambda m, o: o)
    with pytest.raises(fraglab.FraglabError, match="unknown policy"):
        fraglab.run(PGBENCH, overrides={**SHORT, "model.policy": "py-never-registered"})


def test_a_hook_that_raises_ends_the_run():
    def boom(base, hint, order, min_order):
        raise ValueError("boom")

    fraglab.register_policy("py-boom", pagecache_folio_gfp=boom)
    with pytest.raises(BaseException, match="py-boom.*pagecache_folio_gfp"):
        fraglab.run(PGBENCH, overrides={**SHORT, "model.policy": "py-boom"})


def test_a_sweep_forked_warm_through_the_binary(fraglab_binary):
    base = "example:kbuild-thp-burst@workload.duration=6s"
    s = fraglab.sweep([f"a={base}", f"b={base}", f"dm={base},vm.defrag_mode=1"], fork_at="3s")
    straight = fraglab.run("example:kbuild-thp-burst", overrides={"workload.duration": "6s"})
    runs = s.runs.set_index("config")
    # A fork with the first configuration's settings is the uninterrupted run.
    for label in ("a", "b"):
        raw = dict(runs.loc[label, "result"].raw)
        assert raw.pop("fork_at_ns") == 3_000_000_000
        raw.pop("wall_ns", None)
        want = dict(straight.raw)
        want.pop("wall_ns", None)
        assert raw == want
    assert set(s.table.config) == {"a", "b", "dm"}
    with pytest.raises(fraglab.FraglabError, match="not \\[workload\\]"):
        fraglab.sweep([f"a={base}", "b=example:kbuild-thp-burst@workload.duration=7s"], fork_at="3s")
