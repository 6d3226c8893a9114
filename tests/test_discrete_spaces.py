"""Ordered lists of allowed values, switches, enumeration of discrete spaces and the search over a
listed domain, checked against brute force."""

import itertools
import math

import numpy as np
import pytest

import gptask as gt
from gptask.space.domain import ENUMERATION_LIMIT, build_domain
from gptask.space.sampling import SpaceExhausted, lhs_points
from gptask.propose.search import maximize_over
from gptask.space.dimensions import Space

BLOCKS = [16 * k for k in range(1, 17)]
POWERS = [1, 2, 4, 8, 16]


def test_ordinal_places_values_by_value_or_log_and_decodes_to_the_nearest():
    bx = gt.Ordinal("bx", BLOCKS)
    by = gt.Ordinal("by", POWERS, log=True)
    enc = bx.encode([16, 256, 136 - 8])
    assert enc.shape == (3, 1 + 16) and bx.n_columns == 17  # the position, then an indicator per value
    assert enc[:, 0].tolist() == pytest.approx([0.0, 1.0, 7 / 15])
    assert np.array_equal(enc[:, 1:], np.eye(16)[[0, 15, 7]])
    # powers of two evenly spaced on the log line
    assert np.diff(by.encode(POWERS)[:, 0]) == pytest.approx([0.25] * 4)
    u = np.linspace(0.0, 1.0, 1001)
    cols = np.hstack([u[:, None], np.random.default_rng(0).random((len(u), 16))])  # indicators ignored
    decoded = bx.decode(cols)
    nearest = [BLOCKS[int(np.argmin(np.abs(np.asarray(BLOCKS) - (16 + x * 240))))] for x in u]
    assert decoded == nearest
    assert np.array_equal(bx.snap_columns(cols), bx.encode(decoded))
    assert gt.Ordinal("flag", [0, 1]).n_columns == 1 and gt.Ordinal("n", list(range(40))).n_columns == 1
    assert bx.validate(32.0) == 32 and isinstance(bx.validate(32.0), int)
    assert gt.Ordinal("s", ["low", "mid", "high"]).encode(["mid"]).tolist() == [[0.5, 0.0, 1.0, 0.0]]


def test_ordinal_and_boolean_reject_bad_input_naming_it():
    with pytest.raises(ValueError, match="not one of the allowed values"):
        gt.Ordinal("bx", BLOCKS).validate(17)
    with pytest.raises(ValueError, match="repeated"):
        gt.Ordinal("bx", [16, 32, 16])
    with pytest.raises(ValueError, match="must not be empty"):
        gt.Ordinal("bx", [])
    with pytest.raises(ValueError, match="log scale needs every value > 0"):
        gt.Ordinal("bx", [0, 1, 2], log=True)
    with pytest.raises(TypeError, match="all numbers or all strings"):
        gt.Ordinal("bx", [1, "a"])
    with pytest.raises(ValueError, match="True or False"):
        gt.Boolean("b").validate(2)
    with pytest.raises(ValueError, match="not a boolean"):
        gt.Boolean("b").from_text("maybe")
    assert gt.Boolean("b").from_text("1") is True and gt.Boolean("b").validate(0) is False


def test_discrete_dimensions_round_trip_through_json_and_text():
    space = Space([gt.Ordinal("bx", BLOCKS), gt.Ordinal("by", POWERS, log=True), gt.Boolean("ro"),
                   gt.Categorical("alg", ["a", "b"]), gt.Integer("t", 1, 4)])
    again = Space.from_json(space.to_json())
    assert again == space and again.to_json() == space.to_json()
    assert [d.from_text(x) for d, x in zip(space, ["48", "4", "true", "b", "3"])] == [48, 4, True, "b", 3]


def test_enumerate_lists_the_product_of_every_discrete_dimension():
    dims = [gt.Ordinal("bx", BLOCKS[:5]), gt.Ordinal("by", POWERS, log=True), gt.Boolean("ro"),
            gt.Categorical("alg", ["a", "b", "c"]), gt.Integer("t", 1, 3)]
    space = Space(dims)
    assert space.grid_size() == 5 * 5 * 2 * 3 * 3
    enc = space.enumerate(ENUMERATION_LIMIT)
    listed = {tuple(p.values()) for p in space.decode(enc)}
    brute = set(itertools.product(BLOCKS[:5], POWERS, [False, True], ["a", "b", "c"], [1, 2, 3]))
    assert listed == brute and len(enc) == len(brute)
    assert Space([gt.Real("x", 0, 1), gt.Boolean("b")]).grid_size() is None
    with pytest.raises(ValueError, match="more than the limit"):
        space.enumerate(10)


def test_latin_hypercube_draws_every_ordinal_value_equally_often():
    space = Space([gt.Ordinal("by", [1, 2, 4, 64, 128], log=False)])  # very uneven gaps
    pts = lhs_points(space, 500, np.random.default_rng(0))
    counts = np.bincount([[1, 2, 4, 64, 128].index(p["by"]) for p in pts], minlength=5)
    assert counts.tolist() == [100] * 5  # one stratum of the hypercube per value


def _kernel_like_problem(objective):
    params = Space([gt.Ordinal("bx", BLOCKS), gt.Ordinal("by", POWERS, log=True), gt.Ordinal("tx", [1, 2, 3, 4]),
                    gt.Boolean("pad"), gt.Boolean("shm")])
    tasks = Space([gt.Categorical("gpu", ["a", "b"])])
    rules = ["pad==0 or bx % 32 != 0", "bx*by<=1024", "pad==0 or shm != 0",
             "shm == 0 or (bx*tx+14)*(by+14) < 12*1024"]
    return gt.Problem(tasks, params, objective, constraints=rules)


def _allowed_by_hand(p):
    pad, shm = int(p["pad"]), int(p["shm"])
    return ((pad == 0 or p["bx"] % 32 != 0) and p["bx"] * p["by"] <= 1024 and (pad == 0 or shm != 0)
            and (shm == 0 or (p["bx"] * p["tx"] + 14) * (p["by"] + 14) < 12 * 1024))


def test_domain_of_text_restrictions_equals_brute_force_filtering():
    problem = _kernel_like_problem(lambda t, p: 1.0)
    domain = build_domain(problem, {"gpu": "a"})
    listed = {tuple(p.values()) for p in domain.params(range(len(domain)))}
    brute = {c for c in itertools.product(BLOCKS, POWERS, [1, 2, 3, 4], [False, True], [False, True])
             if _allowed_by_hand(dict(zip(["bx", "by", "tx", "pad", "shm"], c)))}
    assert listed == brute and 0 < len(brute) < problem.param_space.grid_size()
    # a callable constraint gives the same domain, judged point by point
    same = gt.Problem(problem.task_space, problem.param_space, problem.objective, constraints=[_allowed_by_hand])
    assert np.array_equal(build_domain(same, {"gpu": "a"}).encoded, domain.encoded)


def test_search_over_a_domain_returns_the_exact_maximiser_not_yet_claimed():
    problem = _kernel_like_problem(lambda t, p: 1.0)
    domain = problem.domain({"gpu": "a"})
    rng = np.random.default_rng(3)
    weights = rng.normal(size=domain.encoded.shape[1])

    def acquisition(x):
        return np.sin(3.0 * x @ weights) + 0.1 * x[:, 0]

    values = acquisition(domain.encoded)
    order = np.argsort(-values)
    claimed = domain.encoded[order[:3]]  # the three best are already run
    res = maximize_over(acquisition, domain, seed=0, exclude=claimed)
    assert np.array_equal(res.encoded, domain.encoded[order[3]])
    assert res.value == pytest.approx(values[order[3]]) and res.n_evaluations == len(domain) - 3
    with pytest.raises(SpaceExhausted):
        maximize_over(acquisition, domain, seed=0, exclude=domain.encoded)


def test_a_large_domain_is_sampled_then_climbed_to_a_local_maximum(monkeypatch):
    import gptask.propose.search as search

    monkeypatch.setattr(search, "EXHAUSTIVE_LIMIT", 50)
    monkeypatch.setattr(search, "DOMAIN_SAMPLE", 40)
    space = Space([gt.Ordinal("a", list(range(30))), gt.Ordinal("b", list(range(30)))])
    problem = gt.Problem(Space([gt.Categorical("t", ["x"])]), space, lambda t, p: 0.0)
    domain = problem.domain({"t": "x"})

    a, b = space.column_slices()

    def acquisition(x):  # one smooth hill in the positions: climbing from any sample reaches its top
        return -((x[:, a][:, 0] - 0.3) ** 2 + (x[:, b][:, 0] - 0.7) ** 2)

    res = maximize_over(acquisition, domain, seed=1)
    assert res.params == {"a": 9, "b": 20}  # 0.3 * 29 = 8.7, 0.7 * 29 = 20.3
    assert res.n_evaluations < len(domain) / 4


def test_tuning_a_discrete_problem_proposes_only_allowed_new_configurations():
    def objective(task, p):
        s = {"a": 1.0, "b": 2.0}[task["gpu"]]
        return s * (1 + (math.log2(p["bx"]) - 5) ** 2 / 10 + (math.log2(p["by"]) - 1) ** 2 / 5
                    + (p["tx"] - 2) ** 2 / 4 + 0.3 * p["shm"])

    problem = _kernel_like_problem(objective)
    res = gt.tune(problem, tasks=[{"gpu": "a"}, {"gpu": "b"}], budget=16, n_initial=6, seed=0, progress=False)
    for i in range(2):
        seen = [tuple(t.params.values()) for t in res.history if t.task_index == i]
        assert len(seen) == len(set(seen)) == 16
        assert all(_allowed_by_hand(dict(t.params)) for t in res.history)
    # the optimum (bx 32, by 2, tx 2, no shared memory) is reached on both tasks
    assert res.best(0)[1] == pytest.approx(1.0) and res.best(1)[1] == pytest.approx(2.0)


def test_candidates_restrict_proposals_to_a_list():
    allowed = [{"x": x, "y": y} for x in range(0, 20, 3) for y in range(0, 20, 5)]
    problem = gt.Problem(Space([gt.Categorical("t", ["u", "v"])]), Space([gt.Integer("x", 0, 19), gt.Integer("y", 0, 19)]),
                         lambda t, p: (p["x"] - 9) ** 2 + (p["y"] - 10) ** 2 + (t["t"] == "v"), candidates=allowed)
    assert problem.is_feasible({"t": "u"}, {"x": 3, "y": 5})
    assert not problem.is_feasible({"t": "u"}, {"x": 4, "y": 5})
    assert "not one of them" in problem.constraint_names(problem.violated({"t": "u"}, {"x": 4, "y": 5}))[0]
    res = gt.tune(problem, tasks=[{"t": "u"}, {"t": "v"}], budget=10, seed=1, progress=False)
    keys = {(c["x"], c["y"]) for c in allowed}
    assert all((t.params["x"], t.params["y"]) in keys for t in res.history)
    assert res.best(0) == ({"x": 9, "y": 10}, 0)
    with pytest.raises(ValueError, match="candidates\\[1\\]"):
        gt.Problem(problem.task_space, problem.param_space, problem.objective, candidates=[{"x": 1, "y": 1}, {"x": 99, "y": 0}])


def test_a_wide_space_of_a_million_configurations_is_listed_compactly_and_searched():
    values = list(range(10))
    space = Space([gt.Ordinal(f"p{k}", values) for k in range(6)])  # 10^6 configurations, 66 columns
    problem = gt.Problem(Space([gt.Categorical("t", ["a", "b"])]), space,
                         lambda t, p: sum((p[f"p{k}"] - 3 - (t["t"] == "b")) ** 2 for k in range(6)) + 1.0,
                         constraints=["p0 + p1 <= 12", "p2 != p3"])
    domain = problem.domain({"t": "a"})
    brute = sum(1 for a in values for b in values if a + b <= 12) * 100 * sum(1 for c in values for d in values if c != d)
    assert len(domain) == brute and domain.index.nbytes <= 6 * 4 * len(domain)  # value indices, not 66 floats
    some = domain.params([0, len(domain) // 2, len(domain) - 1])
    assert all(problem.is_feasible({"t": "a"}, p) for p in some)
    assert np.array_equal(domain.rows_of(space.encode(some)), [0, len(domain) // 2, len(domain) - 1])
    res = gt.tune(problem, tasks=[{"t": "a"}, {"t": "b"}], budget=10, n_initial=5, seed=0, progress=False)
    for i in range(2):
        mine = [tuple(t.params.values()) for t in res.history if t.task_index == i]
        assert len(set(mine)) == 10 and all(problem.is_feasible(res.tasks[i], t.params) for t in res.history)
    assert res.best(0)[1] < 15.0  # well below the space's median (about 50)
