"""distill.train_steps (the N/2 remedy): each batch integrates with an N drawn from the list and is compared at that
N's own checkpoint schedule; bad values fail in the config check."""
import dataclasses

import pytest
import torch

from odevit.losses import trajectory_mse
from odevit.repro import config, pipeline
from odevit.teacher import create_teacher, hidden_states

from tiny_pipeline import tiny_params


def _setup():
    torch.manual_seed(0)
    teacher = create_teacher("vit_tiny_patch16_224", num_classes=10, img_size=28, patch_size=7, in_chans=1,
                             embed_dim=16, depth=2, num_heads=2, mlp_ratio=2.0).eval()
    d = dataclasses.replace(config.Distill(), num_steps=4, mlp_ratio=1.0, train_steps=[2, 4, 8])
    student = pipeline.build_student(teacher, d)
    return teacher, student, d


def test_each_batch_uses_the_drawn_n_and_its_schedule():
    teacher, student, d = _setup()
    dist = [1.0, 2.0]
    sched = pipeline.step_schedules(dist, d)
    assert sorted(sched) == [2, 4, 8] and sched[8][-1] == 8 and sched[2] == [1, 2]
    assert sched[4] == pipeline.schedule(dist, d)  # the trained N's schedule is the plain one
    obj = pipeline.distill(teacher, sched[4], dataclasses.replace(d, jasmin_weight=0.0), step_schedules=sched)
    x, y = torch.randn(3, 1, 28, 28), torch.randint(0, 10, (3,))
    for seed in range(6):
        torch.manual_seed(seed)
        n = sorted(sched)[int(torch.randint(3, (1,)))]  # the draw the objective will make
        torch.manual_seed(seed)
        loss, _ = obj(student, x, y, 0)
        want = trajectory_mse(student.forward_trajectory(x, num_steps=n)["states"], hidden_states(teacher, x), sched[n])
        assert torch.allclose(loss, want), (seed, n)


def test_without_train_steps_the_objective_is_unchanged():
    teacher, student, d = _setup()
    d = dataclasses.replace(d, train_steps=[], jasmin_weight=0.0)
    c = pipeline.schedule([1.0, 2.0], d)
    assert pipeline.step_schedules([1.0, 2.0], d) is None
    x, y = torch.randn(3, 1, 28, 28), torch.randint(0, 10, (3,))
    rng = torch.get_rng_state()
    loss, _ = pipeline.distill(teacher, c, d)(student, x, y, 0)
    assert torch.equal(rng, torch.get_rng_state())  # draws nothing: the default runs' RNG streams are untouched
    want = trajectory_mse(student.forward_trajectory(x)["states"], hidden_states(teacher, x), c)
    assert torch.equal(loss, want)


def test_train_steps_below_the_teacher_depth_is_one_clear_error(tmp_path):
    import yaml
    p = tiny_params()
    p["studies"]["v2_10k"]["cells"]["steps"] = {"train_steps": [1, 4]}  # the tiny teacher has depth 2
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    with pytest.raises(config.ConfigError, match=r"studies\.v2_10k\.cells\.steps\.train_steps"):
        config.check_stage("01_data", str(tmp_path / "params.yaml"))


def test_a_cells_num_steps_below_the_teacher_depth_is_refused_where_the_config_is_checked(tmp_path):
    """`config.check_steps` checks every distill config the first stage reads, a plan cell's num_steps as the block's
    (before: a cell's was first refused by the schedule, once the cell ran)."""
    import yaml
    p = tiny_params()
    p["studies"]["v2_10k"]["cells"]["short"] = {"num_steps": 1}  # the tiny teacher has depth 2
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    with pytest.raises(config.ConfigError, match=r"studies.v2_10k.cells.short.num_steps = 1 is fewer than the 2 teacher"):
        config.check_stage("01_data", str(tmp_path / "params.yaml"))
    p["studies"]["v2_10k"]["cells"]["short"] = {"num_steps": 2}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    config.check_stage("01_data", str(tmp_path / "params.yaml"))  # N = depth: allowed


def test_a_student_fit_with_train_steps_needs_the_teachers_distances():
    """fit_student makes each N's schedule itself, from the teacher's layer distances: a fit given train_steps
    but no distances stops before any training (it would otherwise train every batch at num_steps)."""
    teacher, student, d = _setup()
    with pytest.raises(ValueError, match=r"distill.train_steps = \[2, 4, 8\] needs the teacher's layer distances"):
        pipeline.fit_student(student, teacher, [2, 4], config.Base(), config.Teacher(), d, None, {}, "/nonexistent")
