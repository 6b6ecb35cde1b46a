import pytest

from flink_runtime.executiongraph.states import ExecutionState, IllegalStateTransition, JobStatus

E = ExecutionState
J = JobStatus

HAPPY_PATH = [E.CREATED, E.SCHEDULED, E.DEPLOYING, E.INITIALIZING, E.RUNNING, E.FINISHED]


# -- ExecutionState -----------------------------------------------------------------


def test_terminal_execution_states_are_exactly_finished_canceled_failed():
    assert {s for s in E if s.is_terminal} == {E.FINISHED, E.CANCELED, E.FAILED}


@pytest.mark.parametrize("state", [s for s in E if s.is_terminal])
def test_terminal_execution_state_has_no_outgoing_transition(state):
    assert not any(state.can_transition_to(target) for target in E)


@pytest.mark.parametrize("state", list(E))
def test_no_execution_state_transitions_to_itself(state):
    assert not state.can_transition_to(state)


@pytest.mark.parametrize("state", [s for s in E if not s.is_terminal])
def test_every_live_execution_state_can_fail(state):
    assert state.can_transition_to(E.FAILED)


def test_happy_path_moves_forward_and_may_skip_but_never_back():
    for i, state in enumerate(HAPPY_PATH[:-1]):
        for later in HAPPY_PATH[i + 1 :]:
            assert state.can_transition_to(later), (state, later)
        for earlier in HAPPY_PATH[:i]:
            assert not state.can_transition_to(earlier), (state, earlier)


def test_canceling_ends_canceled_failed_or_finished():
    assert {t for t in E if E.CANCELING.can_transition_to(t)} == {E.CANCELED, E.FAILED, E.FINISHED}


def test_created_may_be_canceled_directly():
    assert E.CREATED.can_transition_to(E.CANCELED)


def test_execution_check_transition_returns_target_when_legal():
    assert E.RUNNING.check_transition(E.FINISHED) is E.FINISHED


def test_execution_check_transition_raises_with_both_states_named():
    with pytest.raises(IllegalStateTransition, match="execution cannot go from FINISHED to RUNNING"):
        E.FINISHED.check_transition(E.RUNNING)


def test_illegal_state_transition_is_a_runtime_error():
    assert issubclass(IllegalStateTransition, RuntimeError)


# -- JobStatus ----------------------------------------------------------------------


def test_globally_terminal_job_states():
    assert {s for s in J if s.is_globally_terminal} == {J.FINISHED, J.CANCELED, J.FAILED}


def test_suspended_is_locally_but_not_globally_terminal():
    assert J.SUSPENDED.is_terminal
    assert not J.SUSPENDED.is_globally_terminal


@pytest.mark.parametrize("state", [J.FINISHED, J.CANCELED, J.FAILED])
def test_globally_terminal_states_are_terminal(state):
    assert state.is_terminal


@pytest.mark.parametrize("state", [s for s in J if not s.is_terminal])
def test_live_job_states_are_not_terminal(state):
    assert not state.is_globally_terminal


@pytest.mark.parametrize("state", [s for s in J if s.is_terminal])
def test_terminal_job_state_has_no_outgoing_transition(state):
    assert not any(state.can_transition_to(target) for target in J)


@pytest.mark.parametrize("state", [s for s in J if not s.is_terminal])
def test_every_live_job_state_can_be_suspended(state):
    # A JobManager that loses leadership must be able to let go of a job in any state.
    assert state.can_transition_to(J.SUSPENDED)


def test_every_job_state_is_reachable_from_initializing():
    seen, frontier = {J.INITIALIZING}, [J.INITIALIZING]
    while frontier:
        state = frontier.pop()
        for target in J:
            if state.can_transition_to(target) and target not in seen:
                seen.add(target)
                frontier.append(target)
    assert seen == set(J)


def test_job_check_transition_returns_target_when_legal():
    assert J.RUNNING.check_transition(J.FAILING) is J.FAILING


def test_job_check_transition_raises_with_both_states_named():
    with pytest.raises(IllegalStateTransition, match="job cannot go from CANCELED to RUNNING"):
        J.CANCELED.check_transition(J.RUNNING)


def test_state_values_are_flink_names():
    assert [s.value for s in E] == [s.name for s in E]
    assert [s.value for s in J] == [s.name for s in J]
    assert "CANCELLING" in J.__members__  # Flink spells the job state with two Ls ...
    assert "CANCELING" in E.__members__  # ... and the execution state with one.
