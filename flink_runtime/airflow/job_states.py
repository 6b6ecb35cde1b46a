"""When a wait on a job's state is over, as the Airflow side reads the states the REST
API reports (as strings: a state this version does not know ends nothing). The rules
live with the client's wait (flink_runtime.client.plans), which the hook's blocking
wait and the trigger share; the operators and the sensor ask them here too."""

from __future__ import annotations

from flink_runtime.client.plans import decisive_state, is_globally_terminal

__all__ = ["decisive_state", "is_globally_terminal"]
