"""High availability: several JobManagers on one job store database, one of them leader.

lease_store.py       the lease row (leader id, fencing token, addresses, renew time)
leader_election.py   contending, renewing and stepping down (JobManagers)
leader_retrieval.py  finding the current leader (TaskManagers, clients)

Below the jobmanager and taskmanager packages: both use it, it uses neither.
"""
