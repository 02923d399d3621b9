"""``rlmkit serve --replicas N``: the replicas behind one address (``deployment.py``, on Ray
Serve), the router sending a session's calls to the replica holding it (``affinity_router.py``)
and the hop of one request to a replica (``forwarding.py``). Only ``deployment.py`` and
``affinity_router.py`` import Ray."""
